/**
 * The shell commands the docs quote, as a user would copy them: extracted
 * from README.md, docs/**\/*.md and infra/helm/**\/README.md for the docs
 * test (`test/project/docs.commands.test.ts`).
 *
 * What counts as a quoted command:
 * - every line of a fenced block tagged `sh`, `bash`, `shell` or `console`
 *   (continuation lines ending in `\` joined; a `$ ` prompt dropped; in a
 *   `console` block or one with prompts, only the prompted lines, the rest
 *   being output);
 * - in an untagged fenced block or an indented (4-space) block: the lines
 *   with a `$ ` prompt, and the lines that start with a program the docs
 *   tell users to run ({@link PROGRAMS}, after `VAR=value` settings or a
 *   pipe's left side);
 * - inline code spans that start with `npm run `, `npm start`, `npm test`,
 *   `npx ` or `node ` followed by a path.
 *
 * Each command is normalised: a trailing `# comment` removed, runs of
 * blanks collapsed. A heredoc (`<<'EOF'` … `EOF`) is kept with the command
 * as its `stdin`.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";

/** Programs whose lines in untagged or indented blocks are commands. */
export const PROGRAMS = ["npm", "npx", "node", "curl", "kubectl", "helm", "go", "openssl", "bash", "git", "docker", "wrangler", "serverless", "aws", "gcloud", "kubeconform"] as const;

/** One quoted command. */
export interface QuotedCommand {
  /** the command line, normalised (see the module note) */
  command: string;
  /** the heredoc's text when the command reads one (`<<'EOF'`), else undefined */
  stdin?: string;
  /** `path:line` where it is quoted (relative to the repository root) */
  where: string;
}

/** The Markdown files whose commands are checked: README.md, docs/**\/*.md, infra/helm/**\/README.md. */
export function docFiles(root: string): string[] {
  const walk = (dir: string, keep: (name: string) => boolean): string[] =>
    readdirSync(dir)
      .sort()
      .flatMap((name) => {
        const path = join(dir, name);
        if (statSync(path).isDirectory()) return walk(path, keep);
        return keep(name) ? [path] : [];
      });
  return [join(root, "README.md"), ...walk(join(root, "docs"), (n) => n.endsWith(".md")), ...walk(join(root, "infra/helm"), (n) => n === "README.md")].map((p) =>
    relative(root, p),
  );
}

/** A trailing `# comment` removed (a `#` after a blank, outside quotes), blanks collapsed. */
export function normalise(line: string): string {
  let quote: string | undefined;
  let cut = line.length;
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (quote !== undefined) {
      if (c === quote) quote = undefined;
    } else if (c === "'" || c === '"') quote = c;
    else if (c === "#" && (i === 0 || /\s/.test(line[i - 1]!))) {
      cut = i;
      break;
    }
  }
  return line.slice(0, cut).trim().replace(/\s+/g, " ");
}

const PROMPT = /^\s*\$ /;
const SETTINGS = /^(?:[A-Z_][A-Z0-9_]*=\S*\s+)*/;

/** Whether an untagged or indented line is a command: a program of {@link PROGRAMS} first (after settings), or on the right of a pipe. */
function startsWithProgram(line: string): boolean {
  const words = line.trim().replace(SETTINGS, "").split(/\s+/);
  if ((PROGRAMS as readonly string[]).includes(words[0] ?? "")) return true;
  const piped = line.split(/\s\|\s/).slice(1);
  return piped.some((part) => (PROGRAMS as readonly string[]).includes(part.trim().replace(SETTINGS, "").split(/\s+/)[0] ?? ""));
}

/** Commands of one block of lines (already stripped of fence or indent); `startLine` is the 1-based line of `lines[0]`. */
function blockCommands(lines: string[], startLine: number, file: string, mode: "all" | "prompted" | "programs"): QuotedCommand[] {
  const out: QuotedCommand[] = [];
  const prompted = lines.some((l) => PROMPT.test(l));
  if (mode === "all" && prompted) mode = "prompted";
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i]!;
    let text: string;
    if (mode === "prompted") {
      if (!PROMPT.test(raw)) continue;
      text = raw.replace(PROMPT, "");
    } else if (mode === "programs") {
      if (PROMPT.test(raw)) text = raw.replace(PROMPT, "");
      else if (startsWithProgram(raw)) text = raw;
      else continue;
    } else {
      if (raw.trim() === "" || raw.trim().startsWith("#")) continue;
      text = raw;
    }
    const line = startLine + i;
    while (text.trimEnd().endsWith("\\") && i + 1 < lines.length) text = `${text.trimEnd().slice(0, -1)} ${lines[++i]!.trim()}`;
    let stdin: string | undefined;
    const heredoc = /<<-?\s*'?"?(\w+)'?"?/.exec(text);
    if (heredoc) {
      const body: string[] = [];
      while (i + 1 < lines.length && lines[i + 1]!.trim() !== heredoc[1]) body.push(lines[++i]!);
      i++;
      stdin = `${body.join("\n")}\n`;
      text = text.replace(heredoc[0], "").trimEnd();
    }
    const command = normalise(text);
    if (command !== "") out.push({ command, ...(stdin !== undefined ? { stdin } : {}), where: `${file}:${line}` });
  }
  return out;
}

/**
 * Every command quoted in `file` (see the module note), in order.
 *
 * @param root the repository root; `file` is relative to it
 */
export function quotedCommands(root: string, file: string): QuotedCommand[] {
  const lines = readFileSync(join(root, file), "utf8").split("\n");
  const out: QuotedCommand[] = [];
  let i = 0;
  let previousBlank = true;
  while (i < lines.length) {
    const line = lines[i]!;
    const fence = /^(\s*)(```+|~~~+)\s*([\w-]*)/.exec(line);
    if (fence) {
      const indent = fence[1]!.length;
      const lang = fence[3]!.toLowerCase();
      const body: string[] = [];
      const start = i + 2;
      i++;
      while (i < lines.length && !lines[i]!.trimStart().startsWith(fence[2]!)) body.push(lines[i++]!.slice(indent));
      i++;
      const mode = ["sh", "bash", "shell"].includes(lang) ? "all" : lang === "console" ? "prompted" : lang === "" || lang === "text" ? "programs" : undefined;
      if (mode !== undefined) out.push(...blockCommands(body, start, file, mode));
      previousBlank = false;
      continue;
    }
    if (previousBlank && /^ {4}\S/.test(line) && !/^\s*[-*+] |^\s*\d+\. /.test(lines[i - 2] ?? "")) {
      const body: string[] = [];
      const start = i + 1;
      while (i < lines.length && (/^ {4}/.test(lines[i]!) || (lines[i]!.trim() === "" && /^ {4}/.test(lines[i + 1] ?? "")))) body.push(lines[i++]!.slice(4));
      out.push(...blockCommands(body, start, file, "programs"));
      previousBlank = false;
      continue;
    }
    for (const m of line.matchAll(/`((?:npm (?:run |start|test|ci)|npx |node (?:functions|infra|test|dist)\/)[^`]*)`/g)) {
      out.push({ command: normalise(m[1]!), where: `${file}:${i + 1}` });
    }
    previousBlank = line.trim() === "";
    i++;
  }
  return out;
}
