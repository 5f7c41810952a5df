/**
 * Leader election on a `coordination.k8s.io/v1` Lease, as client-go's
 * `tools/leaderelection` does (`leaderelection.go`, `resourcelock/leaselock.go`):
 *
 * - the record is the Lease's spec: `holderIdentity`, `leaseDurationSeconds`,
 *   `acquireTime`, `renewTime`, `leaseTransitions`;
 * - every `retryPeriodMs` a candidate reads the Lease; it may take it when it
 *   is absent, unheld (`holderIdentity` empty), or expired. Expiry is judged
 *   on the local clock — the time this process last saw the record CHANGE
 *   plus `leaseDurationSeconds` (client-go's `observedTime`) — never by
 *   comparing the holder's `renewTime` with our clock, so clock skew between
 *   nodes cannot make two holders;
 * - every duration measured locally (the lease as observed, the holder's
 *   renew deadline) is measured on a MONOTONIC clock (`performance.now()`,
 *   Node docs "perf_hooks": not subject to system clock adjustments), so a
 *   wall-clock step (NTP, an administrator, a VM resumed) can neither make a
 *   candidate judge a held Lease expired early (step forward) nor keep a
 *   holder that cannot renew leading past its renew deadline (step back).
 *   The wall clock is only what is written into the Lease (`acquireTime`,
 *   `renewTime`, MicroTime), where other readers see it as information;
 * - writes are `create` / `update` with the read `resourceVersion`, so of two
 *   candidates racing only one succeeds (the other gets 409);
 * - the holder renews every `retryPeriodMs`; when it could not renew for
 *   `renewDeadlineMs` it stops leading (before anyone else may take the Lease,
 *   since renewDeadline < leaseDuration);
 * - `stop()` releases a held Lease (`holderIdentity: ""`,
 *   `leaseDurationSeconds: 1`, client-go's `ReleaseOnCancel`) so another
 *   replica takes over at its next retry instead of after the lease duration.
 *
 * Every API call has a deadline (the client's AbortSignal at `renewDeadlineMs`
 * / 2, at most 5 s).
 */
import { apiDeadline, apiStatus, microTime, type CallOptions, type KubeClient, type Lease } from "../kube/client.ts";
import type { Logger } from "../log.ts";

/** Settings of {@link LeaderElector}; the defaults are client-go's (15 s, 10 s, 2 s). */
export interface LeaderElectionOptions {
  kc: KubeClient;
  namespace: string;
  name: string;
  /** this candidate's identity (pod name, or hostname_uuid) */
  identity: string;
  /** how long a Lease stays valid after its last renewal, seconds (default 15) */
  leaseDurationSeconds?: number;
  /** the holder gives up leading after failing to renew this long, ms (default 10 000; < leaseDuration) */
  renewDeadlineMs?: number;
  /** how often candidates try and the holder renews, ms (default 2 000) */
  retryPeriodMs?: number;
  log: Logger;
  /** wall clock, ms since the epoch, for the times written into the Lease (default `Date.now`) */
  now?: () => number;
  /**
   * monotonic clock, ms from an arbitrary origin, for every duration judged
   * locally (default `performance.now`; must never go back)
   */
  monotonic?: () => number;
}

/**
 * One candidate in a Lease-based election. Start it with {@link LeaderElector.start}.
 */
export class LeaderElector {
  readonly #o: Required<LeaderElectionOptions>;
  readonly #kc: KubeClient;
  #leading = false;
  /** monotonic time of our last successful renewal, ms */
  #renewedAt = 0;
  /** the record last seen and the monotonic time it was first seen, ms (client-go observedRecord/observedTime) */
  #observed: { raw: string; at: number } | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #stopped = true;
  #running: Promise<void> | undefined;
  readonly #listeners = { started: [] as (() => void)[], stopped: [] as (() => void)[] };

  constructor(options: LeaderElectionOptions) {
    this.#o = {
      leaseDurationSeconds: 15,
      renewDeadlineMs: 10_000,
      retryPeriodMs: 2_000,
      now: Date.now,
      monotonic: () => performance.now(),
      ...options,
    };
    if (this.#o.renewDeadlineMs >= this.#o.leaseDurationSeconds * 1000) {
      throw new Error("leader election: the renew deadline must be shorter than the lease duration");
    }
    if (this.#o.retryPeriodMs >= this.#o.renewDeadlineMs) throw new Error("leader election: the retry period must be shorter than the renew deadline");
    this.#kc = options.kc;
  }

  /** `namespace/name` of the Lease. */
  get lease(): string {
    return `${this.#o.namespace}/${this.#o.name}`;
  }

  get identity(): string {
    return this.#o.identity;
  }

  /**
   * Whether this candidate leads now: it holds the Lease and renewed it
   * within the renew deadline (a holder cut off from the API stops acting
   * before another candidate can take over).
   */
  isLeader(): boolean {
    return this.#leading && this.#o.monotonic() - this.#renewedAt < this.#o.renewDeadlineMs;
  }

  /** Call `listener` when this candidate starts / stops leading. */
  on(event: "started" | "stopped", listener: () => void): void {
    this.#listeners[event].push(listener);
  }

  /** Begin trying (the first attempt runs at once). */
  start(): void {
    if (!this.#stopped) return;
    this.#stopped = false;
    this.#schedule(0);
  }

  /** One attempt now (tests, and callers that want a fresh answer). */
  async tryNow(): Promise<boolean> {
    this.#running ??= this.#attempt().finally(() => {
      this.#running = undefined;
    });
    await this.#running;
    return this.isLeader();
  }

  /** Stop trying; release the Lease when held. Never throws. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#running?.catch(() => {});
    if (!this.#leading) return;
    this.#setLeading(false);
    try {
      const lease = await this.#kc.get<Lease>(this.#path(), this.#deadline());
      if (lease.spec?.holderIdentity !== this.#o.identity) return;
      const now = microTime(this.#o.now());
      await this.#kc.replace<Lease>(
        this.#path(),
        { ...lease, spec: { ...lease.spec, holderIdentity: "", leaseDurationSeconds: 1, renewTime: now, acquireTime: now } },
        this.#deadline(),
      );
      this.#o.log({ level: "info", msg: "leader election: lease released", lease: this.lease, identity: this.#o.identity });
    } catch (err) {
      this.#o.log({ level: "warn", msg: "leader election: could not release the lease", lease: this.lease, error: (err as Error).message });
    }
  }

  #schedule(ms: number): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      void this.tryNow().finally(() => this.#schedule(this.#o.retryPeriodMs));
    }, ms);
    this.#timer.unref?.();
  }

  /** `/apis/coordination.k8s.io/v1/namespaces/NS/leases[/NAME]` */
  #path(collection = false): string {
    const base = `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(this.#o.namespace)}/leases`;
    return collection ? base : `${base}/${encodeURIComponent(this.#o.name)}`;
  }

  #deadline(): CallOptions {
    return apiDeadline(Math.min(5000, Math.max(250, this.#o.renewDeadlineMs / 2)));
  }

  async #attempt(): Promise<void> {
    try {
      const ok = await this.#tryAcquireOrRenew(this.#o.monotonic());
      if (ok) {
        this.#renewedAt = this.#o.monotonic();
        this.#setLeading(true);
      } else {
        this.#setLeading(false);
      }
    } catch (err) {
      this.#o.log({ level: "warn", msg: "leader election: lease request failed", lease: this.lease, error: (err as Error).message });
      // A holder that cannot renew keeps leading only until the renew deadline passes.
      if (this.#leading && !this.isLeader()) this.#setLeading(false);
    }
  }

  #setLeading(leading: boolean): void {
    if (leading === this.#leading) return;
    this.#leading = leading;
    this.#o.log({ level: "info", msg: leading ? "leader election: leading" : "leader election: stopped leading", lease: this.lease, identity: this.#o.identity });
    for (const l of this.#listeners[leading ? "started" : "stopped"]) l();
  }

  /**
   * client-go `tryAcquireOrRenew`.
   *
   * @param tick the monotonic time of this attempt, ms
   * @returns whether we hold the Lease now
   */
  async #tryAcquireOrRenew(tick: number): Promise<boolean> {
    const { namespace, name, identity, leaseDurationSeconds } = this.#o;
    const now = microTime(this.#o.now());
    let lease: Lease | undefined;
    try {
      lease = await this.#kc.get<Lease>(this.#path(), this.#deadline());
    } catch (err) {
      if (apiStatus(err) !== 404) throw err;
    }
    if (lease === undefined) {
      try {
        await this.#kc.create<Lease>(
          this.#path(true),
          {
            apiVersion: "coordination.k8s.io/v1",
            kind: "Lease",
            metadata: { name, namespace, labels: { "app.kubernetes.io/name": "external-metrics-bridge-proxy" } },
            spec: { holderIdentity: identity, leaseDurationSeconds, acquireTime: now, renewTime: now, leaseTransitions: 0 },
          },
          this.#deadline(),
        );
        this.#observed = undefined;
        return true;
      } catch (err) {
        if (apiStatus(err) === 409) return false; // another candidate created it first
        throw err;
      }
    }
    const spec = lease.spec ?? {};
    const raw = JSON.stringify([spec.holderIdentity, spec.renewTime, spec.acquireTime, spec.leaseDurationSeconds, spec.leaseTransitions]);
    if (this.#observed?.raw !== raw) this.#observed = { raw, at: tick };
    const holder = spec.holderIdentity ?? "";
    const duration = (spec.leaseDurationSeconds ?? leaseDurationSeconds) * 1000;
    const heldByOther = holder !== "" && holder !== identity;
    if (heldByOther && this.#observed.at + duration > tick) return false;
    const next: Lease = {
      ...lease,
      spec: {
        ...spec,
        holderIdentity: identity,
        leaseDurationSeconds,
        renewTime: now,
        acquireTime: holder === identity ? (spec.acquireTime ?? now) : now,
        leaseTransitions: (spec.leaseTransitions ?? 0) + (holder === identity ? 0 : 1),
      },
    };
    try {
      await this.#kc.replace<Lease>(this.#path(), next, this.#deadline());
      return true;
    } catch (err) {
      if (apiStatus(err) === 409) return false; // someone else wrote it since we read it
      throw err;
    }
  }
}
