// A tiny `--key value` / `--flag` command-line parser with typed getters and errors that
// name the option and what it accepts.
export class ArgError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ArgError';
  }
}

export class Args {
  private readonly values = new Map<string, string>();
  private readonly used = new Set<string>();

  constructor(argv: readonly string[]) {
    for (let i = 0; i < argv.length; i++) {
      const a = argv[i]!;
      if (!a.startsWith('--')) throw new ArgError(`unexpected argument "${a}" (options look like --name value)`);
      const eq = a.indexOf('=');
      if (eq > 0) this.values.set(a.slice(2, eq), a.slice(eq + 1));
      else if (i + 1 < argv.length && !argv[i + 1]!.startsWith('--')) this.values.set(a.slice(2), argv[++i]!);
      else this.values.set(a.slice(2), 'true');
    }
  }

  str(name: string, def: string): string {
    this.used.add(name);
    return this.values.get(name) ?? def;
  }

  oneOf<T extends string>(name: string, options: readonly T[], def: T): T {
    const v = this.str(name, def);
    if (!(options as readonly string[]).includes(v)) throw new ArgError(`--${name} must be one of ${options.join(', ')}; got "${v}"`);
    return v as T;
  }

  num(name: string, def: number, check: (v: number) => boolean = Number.isFinite, rule = 'a number'): number {
    this.used.add(name);
    const raw = this.values.get(name);
    if (raw === undefined) return def;
    const v = Number(raw);
    if (!Number.isFinite(v) || !check(v)) throw new ArgError(`--${name} must be ${rule}; got "${raw}"`);
    return v;
  }

  int(name: string, def: number, min = 0): number {
    return this.num(name, def, (v) => Number.isInteger(v) && v >= min, `an integer >= ${min}`);
  }

  flag(name: string): boolean {
    this.used.add(name);
    const v = this.values.get(name);
    return v !== undefined && v !== 'false';
  }

  /** Throws on options nobody asked for (typos). */
  rejectUnknown(usage: string): void {
    const unknown = [...this.values.keys()].filter((k) => !this.used.has(k));
    if (unknown.length) throw new ArgError(`unknown option${unknown.length > 1 ? 's' : ''} ${unknown.map((k) => `--${k}`).join(', ')}\n${usage}`);
  }
}

/**
 * Runs a command-line entry point: exit 0 when it resolves; on failure a typed error (ArgError,
 * or any error with a `kind`) prints its message, which says what to do; others their stack.
 */
export function runCli(main: () => Promise<void>): void {
  main().then(
    () => process.exit(0),
    (e: unknown) => {
      const err = e instanceof Error ? e : new Error(String(e));
      const typed = err.name === 'ArgError' || 'kind' in err;
      process.stderr.write(`\n${typed ? err.message : err.stack ?? err.message}\n`);
      process.exit(1);
    },
  );
}
