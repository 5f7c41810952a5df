/**
 * One start-up for every entry point (Node `functions/node.ts`, the Worker
 * `functions/worker.ts`, Lambda `shared/lambda/handler.ts`): from the
 * runtime's facts — its environment, clock and `longLived` (the
 * `RuntimeEnv`), the config it found (text from its own source, or a
 * config validated already), its transports and its request log — decide
 * the signing mode, validate the config, build the bridge and say which
 * notices to log once. Where the config text and the signing keys come
 * from, where log lines go and how a refusal is answered stay the entry
 * point's own (a file and `--config` on Node, a binding or the bundled text
 * in the Worker, the environment, a file or SSM on Lambda).
 *
 * Runs in every runtime, the Worker included: no Node-only module here.
 */
import { loadBridge, type Bridge, type TransportsLoader } from "./bridge.ts";
import { loadConfig, type BridgeConfig } from "./config/config.ts";
import type { LogRecord } from "./observability/log.ts";
import { policyStartupNotices } from "./policy/authorize.ts";
import type { RuntimeEnv } from "./providers/types.ts";
import { AUDIENCE_ENV, parseAudience, parseMaxSkew, parseSigningKeys, SIGNING_KEYS_ENV, SIGNING_SKEW_ENV, SigningKeyError, signingMode, signingNotice, type SigningMode } from "./signing.ts";

/** Thrown by {@link bootstrap} (and so by the Node server's start) when the bridge must not serve: no signing keys and no insecure setting, or malformed signing settings. */
export class StartRefusedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "StartRefusedError";
  }
}

/** A config text as the entry point found it: YAML (or JSON) and the name its errors are reported under (`<env:BRIDGE_CONFIG>`, a file name, `ssm:<parameter>`). */
export interface ConfigText {
  text: string;
  source: string;
  /** reads a file the config includes (Node); absent: the config cannot include files */
  readFile?: (path: string) => string;
}

/** How an entry point treats the signing settings at start (`shared/signing.ts` {@link signingMode}). */
export interface SigningFacts {
  /**
   * true (the Node server): no keys without the insecure setting, or a
   * malformed key, skew or audience, throws {@link StartRefusedError}
   * before anything is built; false (Lambda): the mode is returned and the
   * entry point answers `/apis` with the refusal, malformed settings being
   * answered per request (`signatureAuthenticator`)
   */
  refuse: boolean;
  /** the entry point's flag allowing unsigned requests was given (Node `--insecure-allow-unsigned`) */
  insecureAllowUnsigned?: boolean;
  /** how the entry point spells that flag, for messages */
  flag?: string;
}

/** The runtime's facts {@link bootstrap} builds from. */
export interface BootstrapFacts {
  /**
   * environment, clock, `longLived`, metrics: used as it is (the Worker
   * refreshes its `env` on every request), `transports` added when
   * {@link BootstrapFacts.transports} yields some (`loadBridge`)
   */
  runtime: RuntimeEnv;
  /** the config text the entry point read (validated here, `loadConfig`), or a config validated already */
  config: ConfigText | BridgeConfig;
  /** the request log (the app's `log`), made once, after the signing check and the config's validation (it may throw, e.g. an invalid `LOG_LEVEL`) */
  log: () => (record: LogRecord) => void;
  /** the entry point's transports for the config (Node and Lambda: `officialTransports`); absent: none */
  transports?: TransportsLoader;
  /** the signing check at start; absent: the entry point checks the mode itself on every request (the Worker, whose bindings are read per request) */
  signing?: SigningFacts;
}

/** What {@link bootstrap} returns. */
export interface Bootstrapped {
  /** the built bridge (`shared/bridge.ts` `loadBridge`) */
  bridge: Bridge;
  /** the signing mode of `runtime.env` when {@link BootstrapFacts.signing} was given ("refused" only when not `refuse`) */
  signing?: SigningMode;
  /**
   * the records to log once for this start, in this order: the signing
   * notice (the insecure warning, or the refusal; only with
   * {@link BootstrapFacts.signing}), then the policy notices
   * (`policyStartupNotices`: every read denied without a `policy:` section,
   * "running open")
   */
  notices: LogRecord[];
}

/**
 * Start the bridge: check the signing settings, validate the config, make
 * the request log, load the configured providers and build
 * (`shared/bridge.ts` `loadBridge`), in that order.
 *
 * @throws StartRefusedError (only with `signing.refuse`) when there are no
 *   keys and no insecure setting, or a key, the skew or the audience is
 *   malformed: "request signing is misconfigured: …"
 * @throws ConfigError when the config text is invalid (every issue with its line)
 * @throws what `facts.log()` throws, and what `loadBridge` throws (a
 *   configured type this build does not hold, a provider's own error)
 */
export async function bootstrap(facts: BootstrapFacts): Promise<Bootstrapped> {
  const signing = facts.signing !== undefined ? checkSigning(facts.runtime.env, facts.signing) : undefined;
  const config = "text" in facts.config ? loadConfig(facts.config.text, facts.config.source, facts.config.readFile !== undefined ? { readFile: facts.config.readFile } : undefined).config : facts.config;
  const log = facts.log();
  const bridge = await loadBridge(config, facts.runtime, { log }, facts.transports);
  const notice = signing !== undefined ? signingNotice(signing) : undefined;
  return { bridge, ...(signing !== undefined ? { signing } : {}), notices: [...(notice !== undefined ? [notice] : []), ...policyStartupNotices(config)] };
}

/**
 * The signing mode of `env` (`signingMode`), checked as `facts` asks: with
 * `refuse`, a refusal or a malformed key, skew or audience throws.
 *
 * @throws StartRefusedError (only with `facts.refuse`)
 */
function checkSigning(env: Readonly<Record<string, string | undefined>>, facts: SigningFacts): SigningMode {
  const mode = signingMode(env, { insecureAllowUnsigned: facts.insecureAllowUnsigned, flag: facts.flag });
  if (!facts.refuse || mode.mode === "insecure") return mode;
  if (mode.mode === "refused") throw new StartRefusedError(mode.message);
  try {
    parseSigningKeys(env[SIGNING_KEYS_ENV] ?? "");
    parseMaxSkew(env[SIGNING_SKEW_ENV]);
    parseAudience(env[AUDIENCE_ENV]);
  } catch (err) {
    if (err instanceof SigningKeyError) throw new StartRefusedError(`request signing is misconfigured: ${err.message}`);
    throw err;
  }
  return mode;
}
