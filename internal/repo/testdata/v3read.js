#!/usr/bin/env node
// v3read.js — an independent reader of hermesd repository format v3,
// written from docs/format-v3.md alone, with node's built-in modules only
// (crypto for HKDF, AES-256-GCM and SHA-256; Keccak-256 is implemented
// below). It restores one snapshot and verifies it.
//
// usage: node v3read.js (--blobs DIR | --url AGGREGATOR) --head BLOBID
//                       (--master KEY --identity ID | --agent-key KEY --identity ID)
//                       --out DIR
//
// KEY is 32 bytes in base64url (padding optional). --blobs reads blob
// files named by their blob id; --url reads GET /v1/blobs/{id} with a
// closed Range header. Exit status 0 means restored and verified.
'use strict';

const crypto = require('crypto');
const fs = require('fs');
const path = require('path');

// ---- arguments -----------------------------------------------------------

function parseArgs(argv) {
  const a = {};
  for (let i = 0; i < argv.length; i += 2) {
    if (!argv[i].startsWith('--') || i + 1 >= argv.length) throw new Error('bad arguments: ' + argv.join(' '));
    a[argv[i].slice(2)] = argv[i + 1];
  }
  return a;
}

function b64key(s) {
  const b = Buffer.from(s.replace(/=+$/, '').replace(/-/g, '+').replace(/_/g, '/'), 'base64');
  if (b.length !== 32) throw new Error('a key must decode to 32 bytes');
  return b;
}

// ---- blob access: closed ranges only (§9) ----------------------------------

function dirSource(dir) {
  return async (blob, off, len) => {
    if (!/^[A-Za-z0-9_-]{1,128}$/.test(blob)) throw new Error('bad blob id ' + blob);
    const fd = fs.openSync(path.join(dir, blob), 'r');
    try {
      const total = fs.fstatSync(fd).size;
      if (off + len > total) throw new Error(`range ${off}+${len} outside blob ${blob} of ${total} bytes`);
      const buf = Buffer.alloc(len);
      let got = 0;
      while (got < len) {
        const n = fs.readSync(fd, buf, got, len - got, off + got);
        if (n === 0) throw new Error('short read');
        got += n;
      }
      return { buf, total };
    } finally {
      fs.closeSync(fd);
    }
  };
}

function urlSource(base) {
  return async (blob, off, len) => {
    const res = await fetch(`${base.replace(/\/$/, '')}/v1/blobs/${blob}`, {
      headers: { Range: `bytes=${off}-${off + len - 1}` },
    });
    if (res.status !== 206) throw new Error(`GET ${blob} bytes ${off}-${off + len - 1}: HTTP ${res.status}`);
    const m = /^bytes (\d+)-(\d+)\/(\d+)$/.exec(res.headers.get('content-range') || '');
    if (!m || Number(m[1]) !== off || Number(m[2]) !== off + len - 1) throw new Error('bad Content-Range');
    const buf = Buffer.from(await res.arrayBuffer());
    if (buf.length !== len) throw new Error(`GET ${blob}: ${buf.length} bytes, want ${len}`);
    return { buf, total: Number(m[3]) };
  };
}

// ---- keys (§2) -------------------------------------------------------------

function hkdf(ikm, salt, info, n) {
  return Buffer.from(crypto.hkdfSync('sha256', ikm, salt, Buffer.from(info, 'utf8'), n));
}

function deriveKeys(agentKey, identity) {
  return {
    identity: Buffer.from(identity, 'utf8'),
    objectKey: hkdf(agentKey, Buffer.alloc(0), 'hermesd/v3 object key', 32),
    keyId: hkdf(agentKey, Buffer.alloc(0), 'hermesd/v3 key id', 8),
  };
}

// ---- objects (§3) ----------------------------------------------------------

const T_CHUNK = 1, T_TREE = 2, T_INDEX = 3;

function aad(keys, type, header) {
  return Buffer.concat([Buffer.from('hermesd/v3\0', 'utf8'), Buffer.from([type]), header || Buffer.alloc(0), keys.identity]);
}

function decrypt(keys, stored, ad) {
  if (stored.length < 28) throw new Error('object shorter than nonce and tag');
  const d = crypto.createDecipheriv('aes-256-gcm', keys.objectKey, stored.subarray(0, 12));
  d.setAAD(ad);
  d.setAuthTag(stored.subarray(stored.length - 16));
  return Buffer.concat([d.update(stored.subarray(12, stored.length - 16)), d.final()]);
}

const sha256 = (b) => crypto.createHash('sha256').update(b).digest();

// ---- packs (§6) ------------------------------------------------------------

function parseHeader(b) {
  if (b.subarray(0, 4).toString('latin1') !== 'HRMS' || b[4] !== 3) throw new Error('not a v3 pack');
  if ((b[5] & ~3) !== 0) throw new Error('unknown header flags');
  // §6.1: bit 1 = a key escrow of escrowLen bytes opens the index region
  // (head packs only); this reader has the key and skips it.
  const escrowLen = b.readUInt16BE(6);
  if ((b[5] & 2) === 0 ? escrowLen !== 0 : ((b[5] & 1) === 0 || escrowLen === 0 || escrowLen > 4096)) throw new Error('bad key escrow flag or length');
  const dataLen = b.readBigUInt64BE(20);
  if (dataLen > BigInt(Number.MAX_SAFE_INTEGER)) throw new Error('data length out of range');
  const indexLen = b.readUInt32BE(16);
  if (indexLen < escrowLen + 36) throw new Error('index length out of range');
  return { head: (b[5] & 1) === 1, keyId: b.subarray(8, 16), indexLen, escrowLen, dataLen: Number(dataLen) };
}

function parseIndex(p, dataLen) {
  const n = p.readUInt32BE(0);
  let at = 4, off = 0;
  if (n > (p.length - 8) / 45) throw new Error('index count too large');
  const entries = [];
  for (let i = 0; i < n; i++) {
    const type = p[at];
    const id = p.subarray(at + 1, at + 33).toString('hex');
    const o = Number(p.readBigUInt64BE(at + 33));
    const len = p.readUInt32BE(at + 41);
    at += 45;
    if (type !== T_CHUNK && type !== T_TREE) throw new Error('unknown object type');
    if (o !== off || len < 28 || o + len > dataLen) throw new Error('index entries do not tile the data');
    off += len;
    entries.push({ type, id, off: o, len });
  }
  if (off !== dataLen) throw new Error('index entries do not cover the data');
  const c = p.readUInt32BE(at);
  at += 4;
  if (at + c !== p.length) throw new Error('commit length mismatch');
  return { entries, commit: c > 0 ? p.subarray(at) : null };
}

async function readPack(src, keys, blob, knownIndexLen) {
  let head = await src(blob, 0, knownIndexLen ? 28 + knownIndexLen : 28);
  const hdr = parseHeader(head.buf);
  if (head.total !== 28 + hdr.indexLen + hdr.dataLen) throw new Error(`pack ${blob}: size ${head.total} does not match its header`);
  if (!hdr.keyId.equals(keys.keyId)) throw new Error(`pack ${blob}: not this agent's snapshot (key id ${hdr.keyId.toString('hex')})`);
  let stored;
  if (knownIndexLen) {
    if (knownIndexLen !== hdr.indexLen) throw new Error(`pack ${blob}: index length differs from the commit's`);
    stored = head.buf.subarray(28);
  } else {
    stored = (await src(blob, 28, hdr.indexLen)).buf;
  }
  const escrow = stored.subarray(0, hdr.escrowLen);
  const plain = decrypt(keys, stored.subarray(hdr.escrowLen), aad(keys, T_INDEX, Buffer.concat([head.buf.subarray(0, 28), escrow])));
  const ix = parseIndex(plain, hdr.dataLen);
  if (hdr.head !== (ix.commit !== null)) throw new Error('head flag and commit disagree');
  return { blob, hdr, entries: ix.entries, commit: ix.commit, size: head.total };
}

// ---- trees (§5) ------------------------------------------------------------

function checkName(n) {
  if (n === '' || n === '.' || n === '..' || /[\/\\\0]/.test(n)) throw new Error('bad name ' + JSON.stringify(n));
}

function parseTree(b) {
  const n = b.readUInt32BE(0);
  let at = 4;
  const entries = [];
  let prev = null;
  for (let i = 0; i < n; i++) {
    const nl = b.readUInt16BE(at);
    const nameBytes = b.subarray(at + 2, at + 2 + nl);
    const name = new TextDecoder('utf-8', { fatal: true }).decode(nameBytes);
    checkName(name);
    if (prev !== null && Buffer.compare(prev, nameBytes) >= 0) throw new Error('tree entries out of order');
    prev = nameBytes;
    at += 2 + nl;
    const type = b[at];
    const mode = b.readUInt16BE(at + 1);
    if (mode & ~0o777) throw new Error('mode has more than permission bits');
    at += 3;
    if (type === 1) {
      const size = Number(b.readBigUInt64BE(at));
      const sha = b.subarray(at + 8, at + 40).toString('hex');
      const k = b.readUInt32BE(at + 40);
      at += 44;
      const chunks = [];
      for (let j = 0; j < k; j++, at += 32) chunks.push(b.subarray(at, at + 32).toString('hex'));
      entries.push({ name, type: 'file', mode, size, sha, chunks });
    } else if (type === 2) {
      entries.push({ name, type: 'dir', mode, subtree: b.subarray(at, at + 32).toString('hex') });
      at += 32;
    } else {
      throw new Error('unknown entry type ' + type);
    }
  }
  if (at !== b.length) throw new Error('trailing bytes in tree');
  return entries;
}

// ---- Keccak-256 (legacy, as in Ethereum) for the bundle hash (§8) ----------

const RC = [
  0x0000000000000001n, 0x0000000000008082n, 0x800000000000808an, 0x8000000080008000n,
  0x000000000000808bn, 0x0000000080000001n, 0x8000000080008081n, 0x8000000000008009n,
  0x000000000000008an, 0x0000000000000088n, 0x0000000080008009n, 0x000000008000000an,
  0x000000008000808bn, 0x800000000000008bn, 0x8000000000008089n, 0x8000000000008003n,
  0x8000000000008002n, 0x8000000000000080n, 0x000000000000800an, 0x800000008000000an,
  0x8000000080008081n, 0x8000000000008080n, 0x0000000080000001n, 0x8000000080008008n,
];
const ROT = [0, 1, 62, 28, 27, 36, 44, 6, 55, 20, 3, 10, 43, 25, 39, 41, 45, 15, 21, 8, 18, 2, 61, 56, 14];
const M64 = (1n << 64n) - 1n;
const rotl = (x, n) => (n === 0 ? x : ((x << BigInt(n)) | (x >> BigInt(64 - n))) & M64);

function keccakF(s) {
  for (let r = 0; r < 24; r++) {
    const c = [];
    for (let x = 0; x < 5; x++) c[x] = s[x] ^ s[x + 5] ^ s[x + 10] ^ s[x + 15] ^ s[x + 20];
    for (let x = 0; x < 5; x++) {
      const d = c[(x + 4) % 5] ^ rotl(c[(x + 1) % 5], 1);
      for (let y = 0; y < 25; y += 5) s[y + x] ^= d;
    }
    const b = new Array(25);
    for (let x = 0; x < 5; x++) for (let y = 0; y < 5; y++) b[y + 5 * ((2 * x + 3 * y) % 5)] = rotl(s[x + 5 * y], ROT[x + 5 * y]);
    for (let x = 0; x < 5; x++) for (let y = 0; y < 25; y += 5) s[y + x] = b[y + x] ^ (~b[y + (x + 1) % 5] & M64 & b[y + (x + 2) % 5]);
    s[0] ^= RC[r];
  }
}

function keccak256(data) {
  const rate = 136;
  const padded = Buffer.alloc(Math.floor(data.length / rate) * rate + rate);
  data.copy(padded);
  padded[data.length] ^= 0x01; // legacy Keccak padding, not SHA-3's 0x06
  padded[padded.length - 1] ^= 0x80;
  const s = new Array(25).fill(0n);
  for (let at = 0; at < padded.length; at += rate) {
    for (let i = 0; i < rate / 8; i++) s[i] ^= padded.readBigUInt64LE(at + 8 * i);
    keccakF(s);
  }
  const out = Buffer.alloc(32);
  for (let i = 0; i < 4; i++) out.writeBigUInt64LE(s[i], 8 * i);
  return out;
}

// ---- restore ---------------------------------------------------------------

async function main() {
  const a = parseArgs(process.argv.slice(2));
  if (!a.head || !a.identity || !a.out || !(a.blobs || a.url) || !(a.master || a['agent-key'])) {
    throw new Error('usage: v3read.js (--blobs DIR | --url URL) --head ID (--master KEY | --agent-key KEY) --identity ID --out DIR');
  }
  const src = a.blobs ? dirSource(a.blobs) : urlSource(a.url);
  const agentKey = a['agent-key'] ? b64key(a['agent-key']) : hkdf(b64key(a.master), Buffer.from('hermesd/v3', 'utf8'), a.identity, 32);
  const keys = deriveKeys(agentKey, a.identity);

  // 1. The head pack: header, index, commit.
  const head = await readPack(src, keys, a.head, 0);
  if (!head.hdr.head) throw new Error('the head blob is not a head pack');
  const commit = JSON.parse(head.commit.toString('utf8'));
  if (commit.format !== 'hermesd/v3') throw new Error('commit format ' + commit.format);
  if (commit.identity !== a.identity || commit.keyId !== keys.keyId.toString('hex')) throw new Error('not this agent\'s commit');

  // 2. Every live pack's index (one range read each: the commit gives its length).
  const loc = new Map();
  const packs = [];
  for (const p of commit.packs) {
    const pk = await readPack(src, keys, p.blobId, p.indexLength);
    if (pk.size !== p.size) throw new Error(`pack ${p.blobId}: size differs from the commit's`);
    packs.push(pk);
  }
  packs.push(head);
  for (const pk of packs) {
    const base = 28 + pk.hdr.indexLen;
    for (const e of pk.entries) {
      const k = e.type + ':' + e.id;
      if (!loc.has(k)) loc.set(k, { blob: pk.blob, off: base + e.off, len: e.len });
    }
  }

  async function object(type, id) {
    const l = loc.get(type + ':' + id);
    if (!l) throw new Error(`object ${type}:${id} is in no live pack`);
    const { buf } = await src(l.blob, l.off, l.len);
    const plain = decrypt(keys, buf, aad(keys, type));
    if (sha256(plain).toString('hex') !== id) throw new Error(`object ${id} does not hash to its id`);
    return plain;
  }

  // 3. Restore into a new directory.
  const out = a.out;
  if (fs.existsSync(out) && fs.readdirSync(out).length > 0) throw new Error(out + ' is not empty');
  fs.mkdirSync(out, { recursive: true, mode: 0o700 });
  const dirModes = [];
  const leaves = [];
  let files = 0, bytes = 0;

  async function writeFile(rel, mode, size, sha, chunks) {
    const full = path.join(out, ...rel.split('/'));
    const fd = fs.openSync(full, 'wx', 0o600);
    const h = crypto.createHash('sha256');
    let n = 0;
    try {
      for (const c of chunks) {
        const data = await object(T_CHUNK, c);
        fs.writeSync(fd, data);
        h.update(data);
        n += data.length;
      }
    } finally {
      fs.closeSync(fd);
    }
    if (n !== size || h.digest('hex') !== sha) throw new Error(rel + ' does not match its size and SHA-256');
    fs.chmodSync(full, mode);
  }

  async function restoreTree(id, prefix, depth) {
    if (depth > 256) throw new Error('trees nested too deep');
    const entries = parseTree(await object(T_TREE, id));
    for (const e of entries) {
      const rel = prefix ? prefix + '/' + e.name : e.name;
      if (!prefix && (e.name === 'bundle.lock.json' || e.name === 'receipts.ndjson')) throw new Error('the root tree holds ' + e.name);
      if (e.type === 'dir') {
        fs.mkdirSync(path.join(out, ...rel.split('/')), { mode: 0o700 });
        dirModes.push([rel, e.mode]);
        await restoreTree(e.subtree, rel, depth + 1);
      } else {
        await writeFile(rel, e.mode, e.size, e.sha, e.chunks);
        leaves.push([rel, Buffer.from(e.sha, 'hex')]);
        files++;
        bytes += e.size;
      }
    }
  }
  await restoreTree(commit.root, '', 0);
  for (const [name, ref] of [['bundle.lock.json', commit.lock], ['receipts.ndjson', commit.receipts]]) {
    if (ref) await writeFile(name, ref.mode, ref.size, ref.sha256, ref.chunks);
  }
  dirModes.sort((x, y) => (x[0] < y[0] ? 1 : x[0] > y[0] ? -1 : 0)); // deepest first
  for (const [rel, mode] of dirModes) fs.chmodSync(path.join(out, ...rel.split('/')), mode);

  // 4. The bundle hash from the restored files' digests (§8).
  leaves.sort((x, y) => (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0)); // JS string order = UTF-16 code units
  const bundle = leaves.length === 0
    ? keccak256(Buffer.from('stratum/empty-bundle', 'utf8'))
    : keccak256(Buffer.concat(leaves.map(([p, s]) => keccak256(Buffer.concat([Buffer.from(p, 'utf8'), Buffer.from([0]), s])))));
  const got = '0x' + bundle.toString('hex');
  if (got !== commit.bundleHash) throw new Error(`bundle hash ${got}, the commit says ${commit.bundleHash}`);
  if (files !== commit.files || bytes !== commit.bytes) throw new Error('file count or bytes differ from the commit');
  process.stdout.write(JSON.stringify({ bundleHash: got, files, bytes, packs: packs.length }) + '\n');
}

main().catch((e) => {
  process.stderr.write('v3read: ' + e.message + '\n');
  process.exit(1);
});
