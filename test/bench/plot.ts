/**
 * Draws a benchmark figure ({@link BenchFigure} of test/bench/report.ts) as
 * an SVG document: a Vega-Lite spec (https://vega.github.io/vega-lite/docs/)
 * compiled to Vega and rendered headless with `View.toSVG()` (no browser, no
 * canvas). Bars: one bar per x category, series side by side (`xOffset`);
 * lines: one line per series over a numeric x.
 */
import * as vega from "vega";
import * as vl from "vega-lite";
import type { BenchFigure } from "./report.ts";

/** The Vega-Lite spec of a figure (exported for tests and for anyone wanting to restyle it). */
export function figureSpec(figure: BenchFigure): vl.TopLevelSpec {
  const values = figure.series.flatMap((s) => s.points.map(([x, y]) => ({ series: s.name, x, y })));
  const many = figure.series.length > 1;
  const color = many ? { color: { field: "series", type: "nominal" as const, title: null, legend: { orient: "bottom" as const, labelLimit: 400 } } } : {};
  const common = {
    $schema: "https://vega.github.io/schema/vega-lite/v6.json",
    title: figure.title,
    width: figure.kind === "bar" ? { step: many ? 14 : 40 } : 640,
    height: 300,
    background: "white",
    data: { values },
  };
  if (figure.kind === "bar") {
    return {
      ...common,
      mark: { type: "bar", tooltip: true },
      encoding: {
        x: { field: "x", type: "nominal", title: figure.xLabel, sort: null, axis: { labelAngle: -30, labelLimit: 260 } },
        y: { field: "y", type: "quantitative", title: figure.yLabel },
        ...(many ? { xOffset: { field: "series", type: "nominal", sort: null } } : {}),
        ...color,
      },
    } as vl.TopLevelSpec;
  }
  return {
    ...common,
    mark: { type: "line", point: false },
    encoding: {
      x: { field: "x", type: "quantitative", title: figure.xLabel },
      y: { field: "y", type: "quantitative", title: figure.yLabel },
      ...color,
    },
  } as vl.TopLevelSpec;
}

/**
 * Render `figure` as an SVG document (UTF-8 text).
 *
 * @throws Error when Vega-Lite rejects the spec or Vega fails to render it
 */
export async function figureSvg(figure: BenchFigure): Promise<string> {
  const view = new vega.View(vega.parse(vl.compile(figureSpec(figure)).spec), { renderer: "none" });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}
