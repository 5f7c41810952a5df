#!/usr/bin/env node
/**
 * The admin CLI, `external-metrics-bridge` (`npm run cli -- …`):
 *
 *   policy lint [FILE…] [--config FILE] [--strict]  problems in policies
 *   policy explain [FILE…] --namespace NS --metric NAME [--selector SEL] [--resource R] [caller]
 *                                               one decision, with the policy and rule that made it
 *   policy test FILE…                           table-driven expectations (ExternalMetricPolicyTest)
 *   check-hpa FILE… --config FILE               what the bridge does with each External metric of HPAs
 *   config validate FILE…                       BridgeConfig / ProxyConfig files, as the loaders read them
 *
 * FILEs hold the config form or the API form of policies
 * (ExternalMetricPolicy, ClusterExternalMetricPolicy; a `kind: List` as
 * `kubectl get emp,cemp -A -o yaml` prints it; several documents); `-` is
 * standard input. `--kubeconfig FILE [--context NAME]` adds the policy
 * objects of a live cluster (`functions/cli/cluster.ts`).
 *
 * Human output by default, `--output json` for machines. Exit codes: 0 yes
 * (clean or warnings only, Allow, all pass, valid), 1 no (lint errors — or
 * warnings with `--strict` —, Deny, a failure), 2 the command could not run
 * (arguments, unreadable or invalid input, the cluster unreachable). Argument
 * parsing is commander's; the commands live in `functions/cli/`. File
 * arguments are relative to the directory the command was typed in, under
 * `npm run cli` too (see `main`). Guide:
 * docs/policy.md.
 */
import { readFileSync } from "node:fs";
import { Command, CommanderError, Option } from "commander";
import { checkHpa } from "./cli/check-hpa.ts";
import { ClusterReadError, readClusterHpas, readClusterPolicies } from "./cli/cluster.ts";
import { configValidate } from "./cli/config-validate.ts";
import type { ExtraPolicies } from "./cli/workspace.ts";
import { builtProviderTypes, loadProviderModules } from "../shared/providers/registry.ts";
import { EXIT, processIo } from "./cli/io.ts";
import { policyExplain } from "./cli/policy-explain.ts";
import { policyLint } from "./cli/policy-lint.ts";
import { policyTest } from "./cli/policy-test.ts";
import { callerPath } from "./script-args.ts";

const EXIT_CODES_HELP = `
Exit codes:
  0  yes: lint found no errors (warnings alone too, unless --strict), decision Allow,
     every test case / HPA check passed, config valid
  1  no: lint errors (or warnings with --strict), decision Deny, a test case or HPA check failed
  2  the command could not run: bad arguments, unreadable or invalid input, cluster unreachable

FILE "-" reads standard input. Policy files may hold ExternalMetricPolicy and
ClusterExternalMetricPolicy objects, or a kind: List of them (kubectl get emp,cemp -A -o yaml).`;

/** The package's version (package.json), for `--version`. */
function packageVersion(): string {
  return (JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string }).version;
}

/** `--kubeconfig FILE` and `--context NAME`: policies of the live cluster. */
function addClusterOptions(cmd: Command): Command {
  return cmd
    .option("--kubeconfig <file>", "also read ExternalMetricPolicy and ClusterExternalMetricPolicy objects from this cluster (read-only)")
    .option("--context <name>", "the kubeconfig context (default: its current-context)");
}

/** The live cluster's policies when `--kubeconfig` is given; a number is the exit code of a failed read. */
async function clusterPolicies(opts: { kubeconfig?: string; context?: string }, command: string): Promise<ExtraPolicies | undefined | number> {
  if (opts.kubeconfig === undefined) {
    if (opts.context !== undefined) {
      process.stderr.write(`${command}: --context needs --kubeconfig FILE\n`);
      return EXIT.USAGE;
    }
    return undefined;
  }
  try {
    return await readClusterPolicies(opts.kubeconfig, opts.context);
  } catch (err) {
    if (!(err instanceof ClusterReadError)) throw err;
    process.stderr.write(`${command}: ${err.message}\n`);
    return EXIT.USAGE;
  }
}

function outputOption(): Option {
  return new Option("-o, --output <format>", "output format").choices(["human", "json"]).default("human");
}

function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

/** Build the command tree; each action stores its exit code in `result`. */
function buildProgram(result: { code: number }): Command {
  const program = new Command("external-metrics-bridge")
    .description("Admin tools for external-metrics-bridge: ExternalMetricPolicy lint, explain and test; HPA checks")
    .version(packageVersion(), "-V, --version", "print the version (package.json)")
    .exitOverride()
    .showHelpAfterError()
    .addHelpText("after", EXIT_CODES_HELP);

  const policy = program.command("policy").description("write, explain and test ExternalMetricPolicy objects").addHelpText("after", EXIT_CODES_HELP);

  addClusterOptions(
    policy
      .command("lint")
      .description(
        "report schema errors, bad patterns (errors); shadowed rules, metric names no metric rule defines, " +
          "selectors on labels the metric rule cannot map, selectors that only exclude values, with --config the providers' advice about its metric rules (warnings)",
      )
      .argument("[files...]", "policy files (YAML, several documents allowed; - for stdin)")
      .option("-c, --config <file>", "the bridge config: its policies, and metric names and label mappings for the checks"),
  )
    .option("--strict", "exit 1 on warnings too (default: warnings alone exit 0)")
    .addOption(new Option("--allow-warnings", "the default now; kept for old scripts").hideHelp())
    .addOption(outputOption())
    .addHelpText("after", EXIT_CODES_HELP)
    .action(async (files: string[], opts) => {
      const extra = await clusterPolicies(opts, "policy lint");
      if (typeof extra === "number") return void (result.code = extra);
      await loadProviderModules(builtProviderTypes()); // the label-mapping check plans with the providers
      result.code = policyLint(files, { ...opts, extra }, processIo);
    });

  policy
    .command("explain")
    .description("decide one request and show the policy and rule that made the decision, and with --config the backend query the bridge would send")
    .argument("[files...]", "policy files besides the config's")
    .option("-c, --config <file>", "the bridge config (its policies and policy.defaultAction)")
    .requiredOption("-n, --namespace <namespace>", "the request namespace")
    .requiredOption("-m, --metric <name>", "the metric name")
    .option("-l, --selector <selector>", "the labelSelector as sent (for a custom read: its metricLabelSelector)", "")
    .option(
      "-r, --resource <resource>",
      "what is read: external (the External Metrics API) or a custom.metrics.k8s.io group resource (pods, namespaces, ingresses.networking.k8s.io)",
      "external",
    )
    .option("--user <name>", "caller user name (default: the HPA controller)")
    .option("--group <name>", "caller group (repeatable)", collect, [] as string[])
    .option("--service-account <namespace/name>", "caller service account")
    .addOption(new Option("--default-action <action>", "when no policy applies (default: the config's, else Deny)").choices(["Allow", "Deny"]))
    .addOption(outputOption())
    .addHelpText("after", EXIT_CODES_HELP);
  addClusterOptions(policy.commands.at(-1)!).action(async (files: string[], opts) => {
    const extra = await clusterPolicies(opts, "policy explain");
    if (typeof extra === "number") return void (result.code = extra);
    await loadProviderModules(builtProviderTypes()); // the query is the provider's plan()
    result.code = policyExplain(files, { ...opts, extra }, processIo);
  });

  policy
    .command("test")
    .description("run ExternalMetricPolicyTest tables; exit 1 when a case does not hold")
    .argument("<files...>", "test table files")
    .option("-c, --config <file>", "bridge config for tables that name none")
    .option("-p, --policy <file>", "policy file added to every table (repeatable)", collect, [] as string[])
    .addOption(new Option("--default-action <action>", "when no policy applies (overrides tables and config)").choices(["Allow", "Deny"]))
    .addOption(outputOption())
    .addHelpText("after", EXIT_CODES_HELP);
  addClusterOptions(policy.commands.at(-1)!).action(async (files: string[], opts) => {
    const extra = await clusterPolicies(opts, "policy test");
    if (typeof extra === "number") return void (result.code = extra);
    result.code = policyTest(files, { ...opts, policies: opts.policy, extra }, processIo);
  });

  program
    .command("check-hpa")
    .description("for each External metric of autoscaling/v2 HPAs: the metric rule, the backend query and the HPA controller's policy decision")
    .argument("[files...]", "HPA manifests (other kinds are skipped; kind: List is read; - for stdin); none with --kubeconfig: the cluster's HPAs")
    .option("-c, --config <file>", "the bridge config (required unless a FILE holds it)")
    .option("-n, --namespace <namespace>", "use this namespace instead of the HPAs' metadata.namespace (the cluster's HPAs: only this namespace's)")
    .addOption(outputOption())
    .addHelpText("after", EXIT_CODES_HELP);
  addClusterOptions(program.commands.at(-1)!).action(async (files: string[], opts) => {
    if (files.length === 0 && opts.kubeconfig === undefined) {
      process.stderr.write("check-hpa: give HPA files, or --kubeconfig FILE to check the cluster's HPAs\n");
      return void (result.code = EXIT.USAGE);
    }
    const extra = await clusterPolicies(opts, "check-hpa");
    if (typeof extra === "number") return void (result.code = extra);
    let clusterHpas: unknown[] | undefined;
    if (files.length === 0) {
      try {
        clusterHpas = await readClusterHpas(opts.kubeconfig, opts.context, opts.namespace);
      } catch (err) {
        if (!(err instanceof ClusterReadError)) throw err;
        process.stderr.write(`check-hpa: ${err.message}\n`);
        return void (result.code = EXIT.USAGE);
      }
    }
    await loadProviderModules(builtProviderTypes()); // plan() needs the implementations
    result.code = checkHpa(files, { ...opts, extra, clusterHpas }, processIo);
  });

  const config = program.command("config").description("check configuration files").addHelpText("after", EXIT_CODES_HELP);
  config
    .command("validate")
    .description("validate BridgeConfig and ProxyConfig files (the kind decides) with the loaders the bridge and the proxy use; exit 2 when invalid; warnings (the providers' advice about valid metric rules) do not change the exit status")
    .argument("<files...>", "config files (- for stdin)")
    .addOption(outputOption())
    .addHelpText("after", EXIT_CODES_HELP)
    .action(async (files: string[], opts) => {
      await loadProviderModules(builtProviderTypes());
      result.code = configValidate(files, opts, processIo);
    });

  return program;
}

/**
 * Run the CLI on `argv` (as `process.argv`); resolves to the exit code.
 * Every file argument (FILEs, `--config`, `--policy`, `--kubeconfig`) is
 * relative to the directory the user ran the command in, as `npm run serve
 * -- --config` is: under `npm run cli` the process starts in the package
 * root, so it first moves to that directory (`callerPath`, `INIT_CWD`).
 */
async function main(argv: readonly string[]): Promise<number> {
  const result = { code: EXIT.OK as number };
  process.chdir(callerPath("."));
  try {
    await buildProgram(result).parseAsync([...argv]);
  } catch (err) {
    if (err instanceof CommanderError) {
      // help and version are not errors; every parse error is a usage error
      return err.exitCode === 0 ? EXIT.OK : EXIT.USAGE;
    }
    process.stderr.write(`external-metrics-bridge: ${(err as Error).stack ?? String(err)}\n`);
    return EXIT.USAGE;
  }
  return result.code;
}

process.exitCode = await main(process.argv);
