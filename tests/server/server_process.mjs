// Starts `ditto serve` for a test: on --port 0 (the port is read from the "listening on" line it
// prints), waits for GET /health, and stops it with SIGTERM. A server that exits before it is
// ready, or does not get ready in time, fails with its exit status and stderr; withServerLog() adds
// the server's stderr (and exit status, if it died) to the failure message of any later test.
//
// Environment: DITTO_BIN (default build/tools/ditto under the repository root) and
// DITTO_TEST_MODEL (the model directory; required).
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const dittoBin = process.env.DITTO_BIN || path.join(repoRoot, 'build', 'tools', 'ditto');
export const testModel = process.env.DITTO_TEST_MODEL;

const kLogLimit = 1 << 20;  // characters of stderr kept (the last ones)

function appendCapped(log, text) {
  const out = log + text;
  return out.length > kLogLimit ? out.slice(out.length - kLogLimit) : out;
}

async function healthy(baseUrl) {
  try {
    const res = await fetch(`${baseUrl}/health`, { signal: AbortSignal.timeout(2000) });
    await res.arrayBuffer();
    return res.status === 200;
  } catch {
    return false;
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Starts a server. `args` are extra `ditto serve` flags. Resolves to
// { url, baseURL, port, name, proc, stderrTail(n), stop() }; `url` is http://127.0.0.1:PORT and
// `baseURL` the OpenAI base URL (url + "/v1").
export async function startServer({ model = testModel, name = 'ditto-test', args = [], readyTimeoutMs = 180_000 } = {}) {
  if (!model) throw new Error('DITTO_TEST_MODEL is not set: give the model directory `ditto serve` should load');
  const argv = ['serve', model, '--port', '0', '--served-model-name', name, ...args];
  const proc = spawn(dittoBin, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  let exited = null;  // { code, signal } once the process is gone
  const exitPromise = new Promise((resolve) => {
    proc.on('exit', (code, signal) => {
      exited = { code, signal };
      resolve(exited);
    });
  });
  let spawnError = null;
  proc.on('error', (err) => { spawnError = err; });
  proc.stdout.setEncoding('utf8');
  proc.stderr.setEncoding('utf8');
  proc.stdout.on('data', (d) => { stdout = appendCapped(stdout, d); });
  proc.stderr.on('data', (d) => { stderr = appendCapped(stderr, d); });

  const describe = () =>
    `command: ${dittoBin} ${argv.join(' ')}\n--- stdout ---\n${stdout}\n--- stderr ---\n${stderr}`;
  const kill = async () => {
    if (!exited) proc.kill('SIGKILL');
    await exitPromise;
  };

  const deadline = Date.now() + readyTimeoutMs;
  let url = null;
  for (;;) {
    if (spawnError) throw new Error(`cannot start ditto serve: ${spawnError.message}\n${describe()}`);
    if (exited) {
      const how = exited.signal ? `signal ${exited.signal}` : `exit code ${exited.code}`;
      throw new Error(`ditto serve exited before it was ready (${how})\n${describe()}`);
    }
    if (!url) {
      const m = stdout.match(/ditto serve: listening on (http:\/\/[^\s]+)/);
      if (m) url = m[1];
    }
    if (url && (await healthy(url))) break;
    if (Date.now() > deadline) {
      await kill();
      throw new Error(`ditto serve was not ready after ${readyTimeoutMs / 1000} s\n${describe()}`);
    }
    await sleep(url ? 100 : 50);
  }

  return {
    url,
    baseURL: `${url}/v1`,
    port: Number(new URL(url).port),
    name,
    proc,
    stderrTail: (n = 4000) => stderr.slice(-n),
    exited: () => exited,
    // SIGTERM, then SIGKILL after `graceMs`. Resolves to { code, signal, killed }: killed is true when
    // the server did not stop on SIGTERM in time.
    async stop(graceMs = 15_000) {
      if (exited) return { ...exited, killed: false };
      proc.kill('SIGTERM');
      const timer = sleep(graceMs).then(() => null);
      const result = await Promise.race([exitPromise, timer]);
      if (result) return { ...result, killed: false };
      await kill();
      return { ...exited, killed: true };
    },
  };
}

// Wraps a test body (node:test's fn(t)) so that a failure's message ends with the tail of the
// server's stderr, and its exit status if it is no longer running. `getServer` returns the server
// (or undefined before it started).
export function withServerLog(getServer, fn) {
  return async (t) => {
    try {
      await fn(t);
    } catch (err) {
      const server = getServer();
      if (server && err instanceof Error) {
        const gone = server.exited();
        const status = gone ? ` (the server exited: ${gone.signal ? `signal ${gone.signal}` : `exit code ${gone.code}`})` : '';
        const log = `\n--- ditto serve stderr, last lines${status} ---\n${server.stderrTail()}\n--- end of stderr ---`;
        err.message += log;
        if (typeof err.stack === 'string') err.stack += log;
      }
      throw err;
    }
  };
}
