// Loaded with NODE_OPTIONS="--require <this file>" into the DeepSeek Harness 0.2.1rc2 runtime.
//
// That release's single-file executable starts its JSONL persistence worker (the one that
// writes a migrated session file) with `new Worker(new URL("./worker.cjs", import.meta.url))`.
// The executable's bootstrap replaces `worker_threads.Worker` with a class that can load a
// file from the executable's embedded snapshot, but only when it is given a path string; a
// `file:` URL goes through to Node's own Worker, which cannot see the snapshot, and every
// resume of a session older than format V4 fails with
// "Cannot find module '/snapshot/.../dsh-session-persistence-jsonl/lib/worker.cjs'".
//
// This preload runs before that bootstrap, so patching `Worker` here would be wrapped by the
// bootstrap's class, not wrap it. Instead the property becomes an accessor: whichever class is
// assigned to it last (the bootstrap's) is the one wrapped, and the wrapper turns a `file:` URL
// into a path before handing it on.
'use strict';
const workerThreads = require('node:worker_threads');
const { fileURLToPath } = require('node:url');

function asPath(file) {
  if (file instanceof URL && file.protocol === 'file:') return fileURLToPath(file);
  if (typeof file === 'string' && file.startsWith('file:')) return fileURLToPath(file);
  return file;
}

// A plain function, not a class: the bootstrap sets `prototype` and static keys on whatever
// `Worker` it reads back, which a class's read-only `prototype` refuses.
function acceptingUrls(Inner) {
  function Worker(file, options) {
    return new Inner(asPath(file), options);
  }
  Worker.prototype = Inner.prototype;
  return Worker;
}

let current = acceptingUrls(workerThreads.Worker);
Object.defineProperty(workerThreads, 'Worker', {
  configurable: true,
  enumerable: true,
  get() {
    return current;
  },
  set(assigned) {
    current = acceptingUrls(assigned);
  },
});
