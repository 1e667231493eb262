/** toolgate's own version, reported as serverInfo.version. Kept in step with package.json. */
export const TOOLGATE_VERSION = '0.1.0';
