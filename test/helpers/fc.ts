/**
 * fast-check parameters for every property test (`fc.assert(…, fcRuns(n, seed))`).
 *
 * - Default (CI, `npm test`): `numRuns` as the call site states it and a
 *   fixed seed, so a run is reproducible and a red CI run stays red on a
 *   rerun (a failing counterexample is not a coin flip).
 * - Deep mode, `EMB_FC_DEEP=1` (a nightly-style run): `numRuns` × {@link DEEP_FACTOR}
 *   and a fresh random seed per property, printed before it runs so a
 *   failure can be replayed.
 * - `EMB_FC_SEED=<integer>`: that seed for every property (replaying a deep
 *   run's failure: set it with `EMB_FC_DEEP=1` to keep the deep `numRuns`).
 *
 * fast-check itself reports the seed and the shrunk counterexample's path of
 * a failing property (`fc.assert` error text), in both modes.
 */
import type fc from "fast-check";

/** How many times more runs a property gets in deep mode. */
export const DEEP_FACTOR = 20;

/** Seed of properties that do not name one. */
export const DEFAULT_SEED = 20261123;

/** Whether deep mode is on (`EMB_FC_DEEP` set to `1` or `true`). */
export const FC_DEEP = /^(1|true)$/i.test(process.env["EMB_FC_DEEP"] ?? "");

/** The seed of `EMB_FC_SEED`, if set. @throws Error when it is not an integer */
function seedOverride(): number | undefined {
  const text = process.env["EMB_FC_SEED"];
  if (text === undefined || text === "") return undefined;
  const seed = Number(text);
  if (!Number.isSafeInteger(seed)) throw new Error(`EMB_FC_SEED must be an integer, got ${JSON.stringify(text)}`);
  return seed;
}

/**
 * Parameters of one `fc.assert`.
 *
 * @param numRuns the run count for CI (multiplied by {@link DEEP_FACTOR} in deep mode)
 * @param seed the fixed seed for CI (default {@link DEFAULT_SEED}); replaced by a
 *   random one in deep mode and by `EMB_FC_SEED` when set
 * @param extra more fast-check parameters (e.g. `endOnFailure`)
 */
export function fcRuns<T>(numRuns: number, seed: number = DEFAULT_SEED, extra: fc.Parameters<T> = {}): fc.Parameters<T> {
  const override = seedOverride();
  if (!FC_DEEP) return { ...extra, numRuns, seed: override ?? seed };
  const deepSeed = override ?? (Math.random() * 2 ** 31) | 0;
  const runs = numRuns * DEEP_FACTOR;
  console.log(`fast-check deep mode: numRuns ${runs}, seed ${deepSeed} (replay: EMB_FC_DEEP=1 EMB_FC_SEED=${deepSeed})`);
  return { ...extra, numRuns: runs, seed: deepSeed };
}
