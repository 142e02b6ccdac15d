// The objects a folder of manifests defines, file by file, with the rule an
// operator can rely on: a bad edit never takes away what was working.
//   - A file that does not parse keeps its previous objects (all of them).
//   - An invalid object is rejected; if the same object (kind, namespace,
//     name) was in that file before, its previous version stays in effect.
//   - A removed file, or an object removed from a file, is deleted.
//   - The same object in two files: the first file by name wins; the other
//     definition is reported.
// Each update() returns what changed (for the handlers) and the problems of
// that file, worded for people: file, place in the file, object, field.

import { parseManifest, type ManifestObject } from './parse.js';

export interface ManifestProblem {
  readonly file: string;
  /** "services.yaml: document 2 (Service default/web): spec.ports[0].port: Invalid value: ..." */
  readonly message: string;
}

export interface ManifestChanges {
  readonly added: readonly ManifestObject[];
  readonly updated: ReadonlyArray<{ readonly before: ManifestObject; readonly after: ManifestObject }>;
  readonly deleted: readonly ManifestObject[];
}

interface FileState {
  readonly text: string;
  readonly objects: ReadonlyMap<string, ManifestObject>;
  readonly problems: readonly ManifestProblem[];
  readonly ignored: readonly string[];
}

const same = (a: ManifestObject, b: ManifestObject) => JSON.stringify(a.obj) === JSON.stringify(b.obj);

export class ManifestSet {
  private readonly files = new Map<string, FileState>();
  private effective = new Map<string, ManifestObject & { readonly file: string }>();

  /** Replace one file's contents (null: the file is gone). Unchanged text is a no-op. */
  update(file: string, text: string | null): ManifestChanges {
    const prev = this.files.get(file);
    if (text === null) this.files.delete(file);
    else if (prev?.text !== text) this.files.set(file, this.load(file, text, prev));
    else return { added: [], updated: [], deleted: [] };
    return this.recompute();
  }

  /** Every current problem, by file name. */
  problems(): ManifestProblem[] {
    const out = [...this.files.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).flatMap(([, s]) => s.problems);
    return [...out, ...this.conflicts()];
  }

  /** Objects of kinds the proxy does not read, per file (for one info line each). */
  ignored(file: string): readonly string[] {
    return this.files.get(file)?.ignored ?? [];
  }

  fileNames(): string[] {
    return [...this.files.keys()].sort();
  }

  /** The objects in effect now, keyed by ManifestObject.key. */
  objects(): ReadonlyMap<string, ManifestObject & { readonly file: string }> {
    return this.effective;
  }

  private load(file: string, text: string, prev: FileState | undefined): FileState {
    const parsed = parseManifest(text);
    if (parsed.parseError !== null) {
      const kept = prev?.objects.size ? `; its previous ${prev.objects.size} object(s) stay in effect` : '';
      return {
        text,
        objects: prev?.objects ?? new Map(),
        problems: [{ file, message: `${file}: not valid YAML or JSON: ${parsed.parseError}${kept}` }],
        ignored: prev?.ignored ?? [],
      };
    }
    const objects = new Map<string, ManifestObject>();
    const problems: ManifestProblem[] = [];
    for (const o of parsed.objects) {
      if (objects.has(o.key)) {
        problems.push({
          file,
          message: `${file}: ${o.where} (${o.kind} ${o.name}): defined twice in this file; the first one is used`,
        });
        continue;
      }
      objects.set(o.key, o);
    }
    for (const bad of parsed.invalid) {
      const before = bad.key !== null ? prev?.objects.get(bad.key) : undefined;
      if (before && bad.key !== null && !objects.has(bad.key)) objects.set(bad.key, before);
      const kept = before ? ' (its previous version stays in effect)' : ' (not used)';
      for (const e of bad.errors) problems.push({ file, message: `${file}: ${bad.where} (${bad.label}): ${e}${kept}` });
    }
    return { text, objects, problems, ignored: parsed.ignored };
  }

  /** Duplicate definitions across files: the first file by name wins. */
  private conflicts(): ManifestProblem[] {
    const seen = new Map<string, string>();
    const out: ManifestProblem[] = [];
    for (const file of this.fileNames()) {
      for (const o of this.files.get(file)!.objects.values()) {
        const first = seen.get(o.key);
        if (first === undefined) seen.set(o.key, file);
        else
          out.push({
            file,
            message: `${file}: ${o.where} (${o.kind} ${o.name}): also defined in ${first}, which wins`,
          });
      }
    }
    return out;
  }

  private recompute(): ManifestChanges {
    const next = new Map<string, ManifestObject & { readonly file: string }>();
    for (const file of this.fileNames())
      for (const o of this.files.get(file)!.objects.values()) if (!next.has(o.key)) next.set(o.key, { ...o, file });
    const added: ManifestObject[] = [];
    const updated: Array<{ before: ManifestObject; after: ManifestObject }> = [];
    const deleted: ManifestObject[] = [];
    for (const [k, o] of next) {
      const before = this.effective.get(k);
      if (!before) added.push(o);
      else if (!same(before, o)) updated.push({ before, after: o });
    }
    for (const [k, o] of this.effective) if (!next.has(k)) deleted.push(o);
    this.effective = next;
    return { added, updated, deleted };
  }
}
