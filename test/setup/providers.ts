/**
 * vitest `setupFiles` entry: load every provider implementation before a
 * test file runs. The entry points load only the providers their config
 * names (`loadProviderModules`, shared/providers/registry.ts); tests build
 * bridges synchronously with `buildBridge`, which needs them loaded.
 */
import { builtProviderTypes, loadProviderModules } from "../../shared/providers/registry.ts";

await loadProviderModules(builtProviderTypes());
