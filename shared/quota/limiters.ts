/**
 * rate-limiter-flexible's Redis and Memory limiters, loaded from their own files rather than from
 * the package's index, which loads every backend it has (Mongo, MySQL, Postgres, Prisma, Drizzle,
 * Dynamo, Etcd, Valkey, Memcache, the cluster master…: 36 modules where these need 12) into
 * every gateway, where they would stay resident unused. Types come from the index (`import
 * type` loads nothing).
 */
import type * as Rlf from 'rate-limiter-flexible';

/* eslint-disable @typescript-eslint/no-require-imports */
export const RateLimiterRedis = require('rate-limiter-flexible/lib/RateLimiterRedis') as typeof Rlf.RateLimiterRedis;
export const RateLimiterMemory = require('rate-limiter-flexible/lib/RateLimiterMemory') as typeof Rlf.RateLimiterMemory;
export const RateLimiterRes = require('rate-limiter-flexible/lib/RateLimiterRes') as typeof Rlf.RateLimiterRes;
/* eslint-enable @typescript-eslint/no-require-imports */

export type RateLimiterRedis = Rlf.RateLimiterRedis;
export type RateLimiterMemory = Rlf.RateLimiterMemory;
export type RateLimiterRes = Rlf.RateLimiterRes;
