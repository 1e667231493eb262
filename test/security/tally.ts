/**
 * The attack suite's probe counter. Every hostile input the security suites send is one probe,
 * recorded under its set (`workspace-escape[bwrap]`, `ssrf`, `token-attacks[bullmq]`, ...) as
 *
 *   refused — the server refused it or contained it: the check the suite makes passed;
 *   leaked  — something got out: a secret or an outside name in a reply, a file changed outside
 *             the workspace, a byte on a forbidden listener, a tool run without a valid token, a
 *             server that stopped serving, a process that outlived its sandbox's limits.
 *
 * A probe that is neither failed its own test in another way (the test says how). After the
 * test file, one line per set goes to stdout:
 *
 *   ATTACK SUMMARY workspace-escape[bwrap]: 372 probes, 372 refused, 0 leaked
 *
 * and a set with any leak fails the file, whatever its tests said. Jest gives every test file its
 * own module registry, so importing this module gives each file its own tally and its own
 * afterAll (registered here, at import, which is during collection: top level of the file).
 */

interface Counts {
  probes: number;
  refused: number;
  leaked: number;
}

class Tally {
  private readonly sets = new Map<string, Counts>();

  /** Records one probe of `set`. */
  probe(set: string, refused: boolean, leaked: boolean): void {
    let c = this.sets.get(set);
    if (!c) this.sets.set(set, (c = { probes: 0, refused: 0, leaked: 0 }));
    c.probes++;
    if (refused) c.refused++;
    if (leaked) c.leaked++;
  }

  counts(set: string): Readonly<Counts> | undefined {
    return this.sets.get(set);
  }

  /** One line per set, in the order the sets were first probed. */
  lines(): string[] {
    return [...this.sets].map(([set, c]) => `ATTACK SUMMARY ${set}: ${c.probes} probes, ${c.refused} refused, ${c.leaked} leaked`);
  }

  /** The sets with a leak, for the failure message. */
  leaking(): string[] {
    return [...this.sets].filter(([, c]) => c.leaked > 0).map(([set]) => set);
  }
}

export const tally = new Tally();

afterAll(() => {
  const lines = tally.lines();
  // Straight to stdout, not console.log: one plain line per set, no stack trace under it, so a
  // CI log can be grepped for "ATTACK SUMMARY".
  if (lines.length > 0) process.stdout.write(`\n${lines.join('\n')}\n`);
  const leaking = tally.leaking();
  if (leaking.length > 0) throw new Error(`attack probes leaked in: ${leaking.join(', ')}`);
});
