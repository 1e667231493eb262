/**
 * Composes one gateway from its parts: the endpoints' authenticators (handed in), the MCP server
 * whose tool calls go over the bus (rate-limited and admitted fairly per identity), the metrics
 * that follow the bus, and the Koa app. No sockets here (see `listen.ts`) and no environment:
 * the config is handed in, already parsed.
 */
import type Koa from 'koa';
import type { CallBus } from '../shared/bus/bus';
import type { Config } from '../shared/config';
import type { Logger } from '../shared/log';
import { createMcpServer, edgeOptions } from '../shared/mcp/server';
import { MemoryQuotaStore } from '../shared/quota/memory';
import type { QuotaStore } from '../shared/quota/store';
import { ALL_TOOLS } from '../shared/tools/index';
import { ToolRegistry } from '../shared/tools/registry';
import type { AnyTool } from '../shared/tools/tool';
import { createApp } from './app';
import type { Authenticators } from './auth/authenticator';
import { BodyCost } from './body-cost';
import { BusToolRunner } from './bus-runner';
import { GatewayMetrics } from './metrics';
import { RateLimitedRunner, RateLimiter } from './rate-limit';
import { LeaseScheduler } from './scheduling/lease-scheduler';

export interface GatewayDeps {
  config: Readonly<Config>;
  bus: CallBus;
  /** The JSON-RPC endpoints and who authenticates each: `createAuthenticators` (auth/index.ts). */
  authenticators: Authenticators;
  log: Logger;
  /** The tools offered (default: all of them). */
  tools?: readonly AnyTool[];
  /** Process metrics on /metrics (default true). */
  processMetrics?: boolean;
  /**
   * The per-identity counters (rate limits and the scheduler's admissions): shared through Redis
   * by every gateway when a Redis bus is configured (shared/quota/index.ts). Default: in memory,
   * owned and closed by this gateway. A store handed in belongs to the caller.
   */
  quotas?: QuotaStore;
}

export interface Gateway {
  app: Koa;
  metrics: GatewayMetrics;
  /** Request body bytes in flight per identity. */
  bodyCost: BodyCost;
  /** From now on /readyz answers 503, so a load balancer stops sending work (graceful shutdown). */
  drain(): void;
  /** Stops following the bus. The bus itself belongs to the caller. */
  close(): Promise<void>;
}

export function createGateway(deps: GatewayDeps): Gateway {
  const { config, bus, log } = deps;
  const registry = new ToolRegistry(deps.tools ?? ALL_TOOLS);
  const quotas = deps.quotas ?? new MemoryQuotaStore();
  const limiter = new RateLimiter({ maxConcurrent: config.gateway.maxConcurrentCalls, perMinute: config.gateway.callsPerMinute }, quotas);
  // Fair execution: each identity has at most its share of jobs on the bus; the rest wait here.
  const scheduler = new LeaseScheduler({ store: quotas, perTenant: config.gateway.tenantConcurrency });
  // The rate limiter takes a call's admission with its own counters when it can (one round trip).
  const runner = new RateLimitedRunner(new BusToolRunner(bus, config.bus, scheduler), limiter, scheduler);
  const dispatcher = createMcpServer({
    registry,
    runner,
    ...edgeOptions(config),
    onUnexpectedError: (err, method) => log.error({ err, method }, 'request failed unexpectedly'),
    // On BullMQ the tasks live in Redis (any gateway answers); on the in-process bus, in memory.
    tasks: { ...config.tasks, store: bus.tasks, abortElsewhere: (taskId, tenant) => bus.abort(taskId, tenant) },
  });
  const metrics = new GatewayMetrics({
    queueTimeoutMs: config.bus.callTimeoutMs,
    processMetrics: deps.processMetrics,
    admissionWaiting: () => scheduler.waiting(),
  });
  const unfollow = metrics.follow(bus);
  let draining = false;
  const bodyCost = new BodyCost({ maxBytesInFlight: config.gateway.maxBodyBytesInFlight, maxElements: config.gateway.maxJsonElements });
  const app = createApp({
    dispatcher,
    authenticators: deps.authenticators,
    ready: async () => (draining ? 'the gateway is draining' : ((await bus.unready()) ?? true)),
    metrics,
    maxBodyBytes: config.protocol.maxMessageBytes,
    origins: { allowedOrigins: config.gateway.allowedOrigins, allowedHosts: config.gateway.allowedHosts, listenHost: config.gateway.host },
    bodyCost,
    log,
  });
  return {
    app,
    metrics,
    bodyCost,
    drain: () => {
      draining = true;
    },
    close: async () => {
      unfollow();
      await scheduler.close();
      if (!deps.quotas) await quotas.close();
    },
  };
}
