/**
 * Entry point of one forked benchmark server process:
 * `node test/bench/serve-role.ts <role>` (started by `spawnChild` of
 * `test/bench/servers.ts`, which drives it over IPC).
 */
import { childMain } from "./servers.ts";

await childMain(process.argv[2] ?? "");
