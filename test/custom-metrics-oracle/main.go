// Oracle for test/wire/custom-metrics.oracle.test.ts: what the real
// custom.metrics.k8s.io client of k8s.io/metrics v0.37.1 (the one the HPA
// controller uses) sends and decodes, to compare with
// shared/values/custom-answer.ts and shared/k8s/custom-types.ts.
//
// It serves nothing itself (test/wire/custom-metrics-served.oracle.test.ts
// points it at a front of a served bridge). It reads one JSON document on stdin:
//
//	{"host": "http://127.0.0.1:<port>", "calls": [call…], "selectors": [string…]}
//
// and points custom_metrics.NewForConfig (with NewAvailableAPIsGetter over
// client-go discovery, as kube-controller-manager wires it) at host, where
// the test serves /apis and the answers. Each call is
//
//	{"namespace": ns or "" (root-scoped), "group": g, "kind": k,
//	 "name": object name (GetForObject) or omitted (GetForObjects),
//	 "selector": labels selector (GetForObjects), "metric": name,
//	 "metricSelector": labels selector}
//
// and its answer is {"items": [item…]} or {"error": text}, each item the
// client's answer converted to the internal form custom_metrics.MetricValue
// (k8s.io/metrics pkg/apis/custom_metrics), written field by field:
// describedObject, metric {name, selector (metav1.LabelSelector JSON or
// null)}, timestamp (RFC 3339, UTC), unix, windowSeconds (or null), value
// (Quantity.String()) and milliValue (Quantity.MilliValue(), what the HPA
// reads, as a decimal string: int64 does not fit a JSON number's double).
// Each group version of "resourceLists" is fetched first with the discovery
// client's ServerResourcesForGroupVersion and printed as it decoded it. Each selector string is answered with metav1.ParseToLabelSelector's
// JSON or its error. Output: one JSON document {"calls": […], "selectors": […],
// "resourceLists": […]}.
package main

import (
	"encoding/json"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	cmint "k8s.io/metrics/pkg/apis/custom_metrics"
	"k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	"k8s.io/metrics/pkg/client/custom_metrics"
	"k8s.io/metrics/pkg/client/custom_metrics/scheme"
)

type call struct {
	Namespace      string  `json:"namespace"`
	Group          string  `json:"group"`
	Kind           string  `json:"kind"`
	Name           *string `json:"name"`
	Selector       string  `json:"selector"`
	Metric         string  `json:"metric"`
	MetricSelector string  `json:"metricSelector"`
}

type input struct {
	Host          string   `json:"host"`
	Calls         []call   `json:"calls"`
	Selectors     []string `json:"selectors"`
	ResourceLists []string `json:"resourceLists"`
}

type resourceListAnswer struct {
	List  *metav1.APIResourceList `json:"list,omitempty"`
	Error string                  `json:"error,omitempty"`
}

type objectReference struct {
	Kind            string `json:"kind"`
	Namespace       string `json:"namespace"`
	Name            string `json:"name"`
	UID             string `json:"uid"`
	APIVersion      string `json:"apiVersion"`
	ResourceVersion string `json:"resourceVersion"`
	FieldPath       string `json:"fieldPath"`
}

type item struct {
	DescribedObject objectReference `json:"describedObject"`
	Metric          struct {
		Name     string                `json:"name"`
		Selector *metav1.LabelSelector `json:"selector"`
	} `json:"metric"`
	Timestamp     string `json:"timestamp"`
	Unix          int64  `json:"unix"`
	WindowSeconds *int64 `json:"windowSeconds"`
	Value         string `json:"value"`
	MilliValue    int64  `json:"milliValue,string"`
}

type answer struct {
	Items []item `json:"items,omitempty"`
	Error string `json:"error,omitempty"`
}

type selectorAnswer struct {
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
	Error         string                `json:"error,omitempty"`
}

// mapper knows the kinds the suite asks about, with their scope, as the
// HPA's discovery-backed RESTMapper would.
func mapper() meta.RESTMapper {
	kinds := []struct {
		gvk    schema.GroupVersionKind
		plural string
		scope  meta.RESTScope
	}{
		{schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, "pods", meta.RESTScopeNamespace},
		{schema.GroupVersionKind{Version: "v1", Kind: "Service"}, "services", meta.RESTScopeNamespace},
		{schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, "namespaces", meta.RESTScopeRoot},
		{schema.GroupVersionKind{Version: "v1", Kind: "Node"}, "nodes", meta.RESTScopeRoot},
		{schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, "deployments", meta.RESTScopeNamespace},
		{schema.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"}, "ingresses", meta.RESTScopeNamespace},
		{schema.GroupVersionKind{Group: "elbv2.k8s.aws", Version: "v1beta1", Kind: "TargetGroupBinding"}, "targetgroupbindings", meta.RESTScopeNamespace},
		{schema.GroupVersionKind{Group: "networking.gke.io", Version: "v1", Kind: "ClusterThing"}, "clusterthings", meta.RESTScopeRoot},
		{schema.GroupVersionKind{Group: "sqs.services.k8s.aws", Version: "v1alpha1", Kind: "Queue"}, "queues", meta.RESTScopeNamespace},
	}
	var versions []schema.GroupVersion
	for _, k := range kinds {
		versions = append(versions, k.gvk.GroupVersion())
	}
	m := meta.NewDefaultRESTMapper(versions)
	for _, k := range kinds {
		gvr := k.gvk.GroupVersion().WithResource(k.plural)
		m.AddSpecific(k.gvk, gvr, gvr, k.scope)
	}
	return m
}

func parse(text string) (labels.Selector, error) {
	return labels.Parse(text)
}

func internalItems(list []v1beta2.MetricValue) ([]item, error) {
	out := make([]item, 0, len(list))
	for i := range list {
		var v cmint.MetricValue
		if err := scheme.Scheme.Convert(&list[i], &v, nil); err != nil {
			return nil, err
		}
		var it item
		it.DescribedObject = objectReference{
			Kind: v.DescribedObject.Kind, Namespace: v.DescribedObject.Namespace, Name: v.DescribedObject.Name,
			UID: string(v.DescribedObject.UID), APIVersion: v.DescribedObject.APIVersion,
			ResourceVersion: v.DescribedObject.ResourceVersion, FieldPath: v.DescribedObject.FieldPath,
		}
		it.Metric.Name = v.Metric.Name
		it.Metric.Selector = v.Metric.Selector
		it.Timestamp = v.Timestamp.UTC().Format(time.RFC3339Nano)
		it.Unix = v.Timestamp.Unix()
		it.WindowSeconds = v.WindowSeconds
		it.Value = v.Value.String()
		it.MilliValue = v.Value.MilliValue()
		out = append(out, it)
	}
	return out, nil
}

func run(client custom_metrics.CustomMetricsClient, c call) answer {
	var metrics custom_metrics.MetricsInterface
	if c.Namespace == "" {
		metrics = client.RootScopedMetrics()
	} else {
		metrics = client.NamespacedMetrics(c.Namespace)
	}
	metricSelector, err := parse(c.MetricSelector)
	if err != nil {
		return answer{Error: "metricSelector: " + err.Error()}
	}
	gk := schema.GroupKind{Group: c.Group, Kind: c.Kind}
	var values []v1beta2.MetricValue
	if c.Name != nil {
		v, err := metrics.GetForObject(gk, *c.Name, c.Metric, metricSelector)
		if err != nil {
			return answer{Error: err.Error()}
		}
		values = []v1beta2.MetricValue{*v}
	} else {
		selector, err := parse(c.Selector)
		if err != nil {
			return answer{Error: "selector: " + err.Error()}
		}
		list, err := metrics.GetForObjects(gk, selector, c.Metric, metricSelector)
		if err != nil {
			return answer{Error: err.Error()}
		}
		values = list.Items
	}
	items, err := internalItems(values)
	if err != nil {
		return answer{Error: "convert: " + err.Error()}
	}
	return answer{Items: items}
}

func main() {
	var in input
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		panic(err)
	}
	config := &rest.Config{Host: in.Host, QPS: 1e6, Burst: 1e6} // no client-side rate limit
	disco, err := discovery.NewDiscoveryClientForConfig(config)
	if err != nil {
		panic(err)
	}
	client := custom_metrics.NewForConfig(config, mapper(), custom_metrics.NewAvailableAPIsGetter(disco))
	out := struct {
		Calls         []answer             `json:"calls"`
		Selectors     []selectorAnswer     `json:"selectors"`
		ResourceLists []resourceListAnswer `json:"resourceLists"`
	}{Calls: []answer{}, Selectors: []selectorAnswer{}, ResourceLists: []resourceListAnswer{}}
	for _, gv := range in.ResourceLists {
		list, err := disco.ServerResourcesForGroupVersion(gv)
		if err != nil {
			out.ResourceLists = append(out.ResourceLists, resourceListAnswer{Error: err.Error()})
		} else {
			out.ResourceLists = append(out.ResourceLists, resourceListAnswer{List: list})
		}
	}
	for _, c := range in.Calls {
		out.Calls = append(out.Calls, run(client, c))
	}
	for _, s := range in.Selectors {
		ls, err := metav1.ParseToLabelSelector(s)
		if err != nil {
			out.Selectors = append(out.Selectors, selectorAnswer{Error: err.Error()})
		} else {
			out.Selectors = append(out.Selectors, selectorAnswer{LabelSelector: ls})
		}
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		panic(err)
	}
}
