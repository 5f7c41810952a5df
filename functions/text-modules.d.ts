/**
 * Text modules: wrangler.toml `[[rules]] type = "Text"` makes a `.yaml`
 * import evaluate to the file's content as a string (Cloudflare Workers
 * "Bundling" docs, module rules). Only the Worker build resolves these.
 */
declare module "*.yaml" {
  const text: string;
  export default text;
}
