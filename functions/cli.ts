#!/usr/bin/env node
/**
 * The admin CLI, `external-metrics-bridge` (`npm run cli -- …`):
 *
 *   policy lint [FILE…] [--config FILE]         problems in policies
 *   policy explain [FILE…] --namespace NS --metric NAME [--selector SEL] [caller]
 *                                               one decision, with the policy and rule that made it
 *   policy test FILE…                           table-driven expectations (ExternalMetricPolicyTest)
 *   check-hpa FILE… --config FILE               what the bridge does with each External metric of HPAs
 *
 * Human output by default, `--output json` for machines. Exit codes: 0 yes
 * (clean, Allow, all pass), 1 no (findings, Deny, a failure), 2 the command
 * could not run (arguments, unreadable or invalid input). Argument parsing
 * is commander's; the commands live in `functions/cli/`. Guide: docs/policy.md.
 */
import { Command, CommanderError, Option } from "commander";
import { checkHpa } from "./cli/check-hpa.ts";
import { builtProviderTypes, loadProviderModules } from "../shared/providers/registry.ts";
import { EXIT, processIo } from "./cli/io.ts";
import { policyExplain } from "./cli/policy-explain.ts";
import { policyLint } from "./cli/policy-lint.ts";
import { policyTest } from "./cli/policy-test.ts";

const EXIT_CODES_HELP = `
Exit codes:
  0  yes: lint clean, decision Allow, every test case / HPA check passed
  1  no: lint findings, decision Deny, a test case or HPA check failed
  2  the command could not run: bad arguments, unreadable or invalid input`;

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
    .exitOverride()
    .showHelpAfterError()
    .addHelpText("after", EXIT_CODES_HELP);

  const policy = program.command("policy").description("write, explain and test ExternalMetricPolicy objects").addHelpText("after", EXIT_CODES_HELP);

  policy
    .command("lint")
    .description("report schema errors, bad patterns, shadowed rules and metric names no metric rule defines")
    .argument("[files...]", "policy files (YAML, several documents allowed)")
    .option("-c, --config <file>", "the bridge config: its policies, and metric names for the checks")
    .option("--allow-warnings", "exit 0 when there are warnings but no errors")
    .addOption(outputOption())
    .addHelpText("after", EXIT_CODES_HELP)
    .action((files: string[], opts) => {
      result.code = policyLint(files, opts, processIo);
    });

  policy
    .command("explain")
    .description("decide one request and show the policy and rule that made the decision")
    .argument("[files...]", "policy files besides the config's")
    .option("-c, --config <file>", "the bridge config (its policies and policy.defaultAction)")
    .requiredOption("-n, --namespace <namespace>", "the request namespace")
    .requiredOption("-m, --metric <name>", "the external metric name")
    .option("-l, --selector <selector>", "the labelSelector as sent", "")
    .option("--user <name>", "caller user name (default: the HPA controller)")
    .option("--group <name>", "caller group (repeatable)", collect, [] as string[])
    .option("--service-account <namespace/name>", "caller service account")
    .addOption(new Option("--default-action <action>", "when no policy applies (default: the config's, else Deny)").choices(["Allow", "Deny"]))
    .addOption(outputOption())
    .addHelpText("after", EXIT_CODES_HELP)
    .action((files: string[], opts) => {
      result.code = policyExplain(files, opts, processIo);
    });

  policy
    .command("test")
    .description("run ExternalMetricPolicyTest tables; exit 1 when a case does not hold")
    .argument("<files...>", "test table files")
    .option("-c, --config <file>", "bridge config for tables that name none")
    .option("-p, --policy <file>", "policy file added to every table (repeatable)", collect, [] as string[])
    .addOption(new Option("--default-action <action>", "when no policy applies (overrides tables and config)").choices(["Allow", "Deny"]))
    .addOption(outputOption())
    .addHelpText("after", EXIT_CODES_HELP)
    .action((files: string[], opts) => {
      result.code = policyTest(files, { ...opts, policies: opts.policy }, processIo);
    });

  program
    .command("check-hpa")
    .description("for each External metric of autoscaling/v2 HPAs: the metric rule, the backend query and the HPA controller's policy decision")
    .argument("<files...>", "HPA manifests (other kinds are skipped; kind: List is read)")
    .option("-c, --config <file>", "the bridge config (required unless a FILE holds it)")
    .option("-n, --namespace <namespace>", "use this namespace instead of the HPAs' metadata.namespace")
    .addOption(outputOption())
    .addHelpText("after", EXIT_CODES_HELP)
    .action(async (files: string[], opts) => {
      await loadProviderModules(builtProviderTypes()); // plan() needs the implementations
      result.code = checkHpa(files, opts, processIo);
    });

  return program;
}

/** Run the CLI on `argv` (as `process.argv`); resolves to the exit code. */
async function main(argv: readonly string[]): Promise<number> {
  const result = { code: EXIT.OK as number };
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
