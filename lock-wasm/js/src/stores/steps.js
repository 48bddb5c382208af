// The store-side steps (lock-store/steps/, shipped in the package's steps/): the files every
// client loads, read by the format of steps/README.md, as lock-store's steps.rs reads them.

import { readFileSync } from 'node:fs';

/** The text of steps file `name` (e.g. `postgres.sql`). */
export function stepsFile(name) {
  return readFileSync(new URL(`../../steps/${name}`, import.meta.url), 'utf8');
}

const MARKER = '-- step: ';

/** Every step of `file` as `[name, text]`, in file order. */
export function allSteps(file) {
  /** @type {[string, string][]} */
  const steps = [];
  /** @type {{name: string, lines: string[]} | null} */
  let current = null;
  for (const line of file.split('\n')) {
    if (line.startsWith(MARKER)) {
      if (current !== null) steps.push([current.name, join(current.lines)]);
      current = { name: line.slice(MARKER.length).trim(), lines: [] };
    } else if (current !== null && !line.trimStart().startsWith('--')) {
      current.lines.push(line);
    }
  }
  if (current !== null) steps.push([current.name, join(current.lines)]);
  return steps;
}

function join(lines) {
  const first = lines.findIndex((l) => l.trim() !== '');
  if (first < 0) return '';
  let last = lines.length - 1;
  while (lines[last].trim() === '') last -= 1;
  return lines.slice(first, last + 1).join('\n');
}

/** Step `name` of `file` with `{placeholder}`s filled from `values`; throws if there is none. */
export function step(file, name, values) {
  const found = allSteps(file).find(([n]) => n === name);
  if (found === undefined) throw new Error(`expiring-lock: no step ${JSON.stringify(name)} in the steps file`);
  let text = found[1];
  for (const [key, value] of Object.entries(values)) text = text.replaceAll(`{${key}}`, value);
  return text;
}
