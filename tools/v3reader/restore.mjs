#!/usr/bin/env node
// restore.mjs: an independent reader of hermesd repository format v3.
//
// Written from docs/format-v3.md alone, with node's built-in modules only
// (node:crypto for HKDF-SHA256, AES-256-GCM and SHA-256; fetch for the
// Walrus aggregator), to show that the format is documented well enough to
// restore a snapshot without hermesd's Go code. Section numbers (§n) refer
// to that document.
//
//   node restore.mjs --aggregator URL --blob HEAD_BLOB_OR_PATCH_ID --identity NAME
//                    (--key-file FILE | --agent-key-file FILE) --out DIR
//
// On success it prints one JSON line (root, bundle hash, counts) and exits
// 0. On failure it prints one line to stderr and exits with hermesd's
// codes: 1 network or disk, 2 usage, 3 verification failed, 4 blob not
// found, 6 authentication failed (wrong key or identity, or tampered).

import { createDecipheriv, createHash, hkdfSync, randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';

// ---------------------------------------------------------------- errors

class ReaderError extends Error {
  constructor(code, msg) { super(msg); this.code = code; }
}
const fail = (code) => (msg) => { throw new ReaderError(code, msg); };
const usage = fail(2);
const verify = fail(3); // structure, lengths, ids, SHA-256, bundle hash
const auth = fail(6);   // AES-GCM authentication, key id, identity
const io = fail(1);

// ---------------------------------------------------------------- limits (§11)

const MiB = 1024 * 1024;
const MAX_INDEX = 64 * MiB;           // stored index
const MAX_PACK = 16 * 1024 * MiB;     // whole pack
const MAX_CHUNK = 16 * MiB;           // chunk plaintext
const MAX_TREE = 64 * MiB;            // tree plaintext
const MAX_COMMIT = 16 * MiB;
const MAX_PACKS = 100000;
const MAX_DEPTH = 256;
// §11 bounds files by the commit's count but not directories: trees may
// share subtrees, so a hostile DAG of a few small trees would expand to
// 2^256 directories. This reader's own bound.
const MAX_DIRS = 1000000;
const MAX_SYMLINKS = 1 << 20;         // §11
const MAX_RANGE = 32 * MiB;           // one coalesced chunk request
const OVERHEAD = 28;                  // nonce + tag (§3)
const HEADER = 28;                    // pack header (§6)
const ENTRY = 45;                     // index entry (§6)
const MAX_KEY_FILE = 4096;

const T_CHUNK = 0x01, T_TREE = 0x02, T_INDEX = 0x03;

// ---------------------------------------------------------------- Keccak-256
//
// Node's crypto offers NIST SHA3-256 but not the original Keccak-256 the
// bundle hash uses (§1: padding byte 0x01, not SHA-3's 0x06). This is the
// Keccak-f[1600] permutation written from the Keccak reference (FIPS 202
// §3.2, which the original Keccak shares; only the padding differs), with
// 64-bit lanes as BigInt. Round constants and rotation offsets are derived
// as the specification defines them rather than tabulated.

const M64 = (1n << 64n) - 1n;
const rotl = (v, n) => (n === 0 ? v : ((v << BigInt(n)) | (v >> BigInt(64 - n))) & M64);

const KECCAK_RC = (() => {
  // rc(t): the output bit of the LFSR x^8 + x^6 + x^5 + x^4 + 1 (FIPS 202 Algorithm 5).
  let r = 1;
  const bits = [];
  for (let t = 0; t < 7 * 24; t++) {
    bits.push(r & 1);
    r <<= 1;
    if (r & 0x100) r ^= 0x171;
  }
  const rc = [];
  for (let ir = 0; ir < 24; ir++) {
    let c = 0n;
    for (let j = 0; j <= 6; j++) if (bits[j + 7 * ir]) c |= 1n << BigInt((1 << j) - 1);
    rc.push(c);
  }
  return rc;
})();

const KECCAK_ROT = (() => {
  // FIPS 202 Algorithm 2: offsets (t+1)(t+2)/2 along the path (x,y) -> (y, 2x+3y).
  const rot = new Array(25).fill(0);
  let x = 1, y = 0;
  for (let t = 0; t < 24; t++) {
    rot[x + 5 * y] = (((t + 1) * (t + 2)) / 2) % 64;
    [x, y] = [y, (2 * x + 3 * y) % 5];
  }
  return rot;
})();

function keccakF(a) {
  const c = new Array(5), b = new Array(25);
  for (let round = 0; round < 24; round++) {
    // θ
    for (let x = 0; x < 5; x++) c[x] = a[x] ^ a[x + 5] ^ a[x + 10] ^ a[x + 15] ^ a[x + 20];
    for (let x = 0; x < 5; x++) {
      const d = c[(x + 4) % 5] ^ rotl(c[(x + 1) % 5], 1);
      for (let y = 0; y < 25; y += 5) a[x + y] ^= d;
    }
    // ρ and π
    for (let x = 0; x < 5; x++) {
      for (let y = 0; y < 5; y++) b[y + 5 * ((2 * x + 3 * y) % 5)] = rotl(a[x + 5 * y], KECCAK_ROT[x + 5 * y]);
    }
    // χ
    for (let y = 0; y < 25; y += 5) {
      for (let x = 0; x < 5; x++) a[x + y] = b[x + y] ^ (~b[((x + 1) % 5) + y] & M64 & b[((x + 2) % 5) + y]);
    }
    // ι
    a[0] ^= KECCAK_RC[round];
  }
}

function keccak256(data) {
  const rate = 136;
  const padded = Buffer.alloc((Math.floor(data.length / rate) + 1) * rate);
  data.copy(padded);
  padded[data.length] ^= 0x01;
  padded[padded.length - 1] ^= 0x80;
  const a = new Array(25).fill(0n);
  for (let off = 0; off < padded.length; off += rate) {
    for (let i = 0; i < rate / 8; i++) a[i] ^= padded.readBigUInt64LE(off + 8 * i);
    keccakF(a);
  }
  const out = Buffer.alloc(32);
  for (let i = 0; i < 4; i++) out.writeBigUInt64LE(a[i], 8 * i);
  return out;
}

// ---------------------------------------------------------------- keys (§2)

const enc = (s) => Buffer.from(s, 'utf8');
const sha256 = (b) => createHash('sha256').update(b).digest();
const hkdf = (ikm, salt, info, n) => Buffer.from(hkdfSync('sha256', ikm, salt, info, n));

// parseKey reads a 32-byte key's text form: 64 hex digits, or base64url
// (hermesd's key files; padding and the standard alphabet accepted).
function parseKey(text, what) {
  const s = text.trim();
  if (/^[0-9a-fA-F]{64}$/.test(s)) return Buffer.from(s, 'hex');
  const b64 = s.replace(/=+$/, '').replace(/\+/g, '-').replace(/\//g, '_');
  if (!/^[A-Za-z0-9_-]{43}$/.test(b64)) usage(`${what}: not a 32-byte key (base64url or 64 hex digits)`);
  return Buffer.from(b64, 'base64url');
}

function readKeyFile(file, what) {
  let b;
  try {
    const fd = fs.openSync(file, 'r');
    try {
      b = Buffer.alloc(MAX_KEY_FILE + 1);
      b = b.subarray(0, fs.readSync(fd, b, 0, b.length, 0));
    } finally { fs.closeSync(fd); }
  } catch (e) { usage(`${what} ${file}: ${e.code || e.message}`); }
  if (b.length > MAX_KEY_FILE) usage(`${what} ${file}: larger than ${MAX_KEY_FILE} bytes`);
  return parseKey(b.toString('utf8'), `${what} ${file}`);
}

function deriveKeys({ masterKey, agentKey, identity }) {
  const agent = agentKey ?? hkdf(masterKey, enc('hermesd/v3'), enc(identity), 32);
  return {
    object: hkdf(agent, Buffer.alloc(0), enc('hermesd/v3 object key'), 32),
    keyId: hkdf(agent, Buffer.alloc(0), enc('hermesd/v3 key id'), 8),
  };
}

// ---------------------------------------------------------------- objects (§3)

const aad = (type, identity, header) =>
  Buffer.concat([enc('hermesd/v3'), Buffer.from([0x00, type]), header ?? Buffer.alloc(0), enc(identity)]);

function open(ctx, stored, type, what, header) {
  if (stored.length < OVERHEAD) verify(`${what}: stored length ${stored.length} below ${OVERHEAD}`);
  const d = createDecipheriv('aes-256-gcm', ctx.keys.object, stored.subarray(0, 12), { authTagLength: 16 });
  d.setAAD(aad(type, ctx.identity, header));
  d.setAuthTag(stored.subarray(stored.length - 16));
  try {
    return Buffer.concat([d.update(stored.subarray(12, stored.length - 16)), d.final()]);
  } catch {
    return auth(`${what}: authentication failed (tampered, or another key or identity)`);
  }
}

// openObject decrypts an object of the index with its type's AAD and
// checks that its plaintext hashes to its id.
function openObject(ctx, stored, ref) {
  const what = `${ref.type === T_TREE ? 'tree' : 'chunk'} ${ref.id} in pack ${ref.blob}`;
  const p = open(ctx, stored, ref.type, what);
  if (sha256(p).toString('hex') !== ref.id) verify(`${what}: plaintext does not hash to its id`);
  return p;
}

// ---------------------------------------------------------------- Walrus

const BLOB_ID = /^[A-Za-z0-9_-]{1,128}$/;

// A pack may be a quilt patch (§13): its reference is then longer than a
// blob id's 43 characters. A patch is read whole, without Range, and its
// ranges are cut from it; this reader holds at most MAX_PATCH of it.
const BLOB_ID_LEN = 43;
const MAX_PATCH = 16 * MiB;
const isPatch = (ref) => ref.length > BLOB_ID_LEN;

// readPatch fetches the whole quilt patch id (§13) and keeps it for the
// next ranges, the newest patches up to MAX_KEPT bytes in all.
const MAX_KEPT = 64 * MiB;
async function readPatch(ctx, id) {
  const kept = ctx.patches.get(id);
  if (kept) return kept;
  const p = fetchPatch(ctx, id);
  ctx.patches.set(id, p);
  try {
    const buf = await p;
    ctx.patchSizes.set(id, buf.length);
    ctx.patchBytes += buf.length;
    for (const [old, n] of ctx.patchSizes) { // oldest first
      if (ctx.patchBytes <= MAX_KEPT || old === id) break;
      ctx.patchBytes -= n;
      ctx.patchSizes.delete(old);
      ctx.patches.delete(old);
    }
    return buf;
  } catch (e) {
    ctx.patches.delete(id);
    throw e;
  }
}

// get fetches url, retrying (three attempts in all) network errors, 429
// and 5xx; what names the blob or patch in errors.
async function get(url, headers, what) {
  for (let attempt = 1; ; attempt++) {
    let res;
    try {
      res = await fetch(url, { headers, redirect: 'error', signal: AbortSignal.timeout(120000) });
    } catch (e) {
      if (attempt < 3) { await sleep(500 * attempt); continue; }
      io(`read ${what}: ${e.cause?.code || e.name}`);
    }
    if ((res.status === 429 || res.status >= 500) && attempt < 3) {
      await res.body?.cancel();
      await sleep(500 * attempt);
      continue;
    }
    if (res.status === 404) { await res.body?.cancel(); fail(4)(`${what}: not found`); }
    return res;
  }
}

async function fetchPatch(ctx, id) {
  const url = `${ctx.aggregator}/v1/blobs/by-quilt-patch-id/${id}`;
  const res = await get(url, {}, `patch ${id}`);
  if (res.status !== 200) { await res.body?.cancel(); io(`read patch ${id}: HTTP ${res.status}`); }
  // The ETag names the patch or its quilt (the aggregator sends the
  // quilt's id), bare or quoted.
  const etag = res.headers.get('etag');
  const quilt = Buffer.from(id, 'base64url').subarray(0, 32).toString('base64url');
  if (etag && ![id, quilt].includes(etag.replace(/^"|"$/g, ''))) { await res.body?.cancel(); verify(`patch ${id}: answered as ${JSON.stringify(etag)}`); }
  const parts = [];
  let n = 0;
  for await (const part of res.body) {
    n += part.length;
    if (n > MAX_PATCH) io(`read patch ${id}: more than the ${MAX_PATCH} bytes a patch may hold`);
    parts.push(part);
  }
  const len = res.headers.get('content-length');
  if (len !== null && Number(len) !== n) io(`read patch ${id}: ${n} of ${len} bytes`);
  ctx.stats.ranges++;
  ctx.stats.downloaded += n;
  return Buffer.concat(parts, n);
}

// readRange fetches bytes first..last (inclusive) of a blob in one closed
// range request and returns them with the blob's total size. The body is
// bounded by the range: a server sending more is refused. A quilt patch's
// ranges come from the whole patch, whose length is the total (§13).
async function readRange(ctx, blob, first, last) {
  if (isPatch(blob)) {
    const patch = await readPatch(ctx, blob);
    if (last >= patch.length) verify(`patch ${blob}: range ${first}-${last} is past its end (truncated)`);
    return { buf: Buffer.from(patch.subarray(first, last + 1)), total: patch.length };
  }
  const want = last - first + 1;
  const url = `${ctx.aggregator}/v1/blobs/${blob}`;
  const res = await get(url, { Range: `bytes=${first}-${last}` }, `blob ${blob}`);
  if (res.status === 416) { await res.body?.cancel(); verify(`blob ${blob}: range ${first}-${last} is past its end (truncated)`); }
  if (res.status !== 206) { await res.body?.cancel(); io(`read blob ${blob}: HTTP ${res.status}`); }
  const m = /^bytes (\d+)-(\d+)\/(\d+)$/.exec(res.headers.get('content-range') ?? '');
  if (!m || Number(m[1]) !== first || Number(m[2]) !== last) {
    await res.body?.cancel();
    io(`read blob ${blob}: unexpected Content-Range ${JSON.stringify(res.headers.get('content-range'))}`);
  }
  const total = Number(m[3]);
  const buf = Buffer.alloc(want);
  let n = 0;
  for await (const part of res.body) {
    if (n + part.length > want) { io(`read blob ${blob}: more than the ${want} bytes asked for`); }
    buf.set(part, n);
    n += part.length;
  }
  if (n !== want) io(`read blob ${blob}: ${n} of ${want} bytes`);
  ctx.stats.ranges++;
  ctx.stats.downloaded += n;
  return { buf, total };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------- packs (§6)

function parseHeader(ctx, h, blob) {
  if (h.subarray(0, 4).toString('latin1') !== 'HRMS') verify(`pack ${blob}: not a hermesd blob`);
  if (h[4] !== 0x03) verify(`pack ${blob}: hermesd blob version ${h[4]}, not a v3 pack`);
  if (h[5] & 0xfc) verify(`pack ${blob}: unknown flags ${h[5]}`);
  // §6.1: flag bit 1 = a key escrow of E bytes (u16 at 6) opens the index
  // region of a head pack; this reader holds the key and skips it.
  const E = h.readUInt16BE(6);
  if (!(h[5] & 2) && E !== 0) verify(`pack ${blob}: header bytes 6-7 are not zero`);
  if (h[5] & 2 && (!(h[5] & 1) || E === 0 || E > 4096)) verify(`pack ${blob}: bad key escrow (flags ${h[5]}, ${E} bytes)`);
  const keyId = h.subarray(8, 16);
  if (!keyId.equals(ctx.keys.keyId)) {
    auth(`pack ${blob}: written with key id ${keyId.toString('hex')}, not ${ctx.keys.keyId.toString('hex')}: not this agent's snapshot, or another key`);
  }
  const L = h.readUInt32BE(16);
  const D = h.readBigUInt64BE(20);
  if (L < 36 + E) verify(`pack ${blob}: index length ${L} below ${36 + E}`);
  if (L > MAX_INDEX) verify(`pack ${blob}: index of ${L} bytes, over ${MAX_INDEX}`);
  if (D > BigInt(MAX_PACK)) verify(`pack ${blob}: objects region of ${D} bytes, over ${MAX_PACK}`);
  return { head: (h[5] & 1) === 1, E, L, D: Number(D), size: HEADER + L + Number(D) };
}

// parseIndex checks that the entries tile the objects region and returns
// them with the embedded commit bytes (empty unless head).
function parseIndex(p, hdr, blob) {
  const what = `index of pack ${blob}`;
  if (p.length < 8) verify(`${what}: ${p.length} bytes`);
  const n = p.readUInt32BE(0);
  if (n > (p.length - 8) / ENTRY) verify(`${what}: ${n} entries do not fit in ${p.length} bytes`);
  const entries = [];
  const seen = new Set();
  let at = 4, next = 0;
  for (let i = 0; i < n; i++, at += ENTRY) {
    const type = p[at];
    const id = p.subarray(at + 1, at + 33).toString('hex');
    const off = p.readBigUInt64BE(at + 33);
    const len = p.readUInt32BE(at + 41);
    if (type !== T_CHUNK && type !== T_TREE) verify(`${what}: entry ${i} has unknown type ${type}`);
    if (off !== BigInt(next)) verify(`${what}: entry ${i} at ${off}, not ${next} (overlap or gap)`);
    if (len < OVERHEAD) verify(`${what}: entry ${i} of ${len} bytes, below ${OVERHEAD}`);
    if (next + len > hdr.D) verify(`${what}: entry ${i} runs past the objects region`);
    if (seen.has(type + id)) verify(`${what}: object ${id} twice`);
    seen.add(type + id);
    entries.push({ type, id, off: HEADER + hdr.L + next, len, blob });
    next += len;
  }
  if (next !== hdr.D) verify(`${what}: entries end at ${next}, the objects region at ${hdr.D}`);
  if (at + 4 > p.length) verify(`${what}: no commit length`);
  const cl = p.readUInt32BE(at);
  if (cl > MAX_COMMIT) verify(`${what}: commit of ${cl} bytes, over ${MAX_COMMIT}`);
  if (at + 4 + cl !== p.length) verify(`${what}: commit length ${cl} does not end the index`);
  if ((cl > 0) !== hdr.head) verify(`${what}: ${hdr.head ? 'head pack without' : 'commit in a pack that is not a head'} a commit`);
  return { entries, commit: p.subarray(at + 4) };
}

// openPack reads a pack's header and index in one range read (bytes
// 0..28+L-1; L known from the commit) or two (the head, L unknown).
async function openPack(ctx, blob, want) {
  let h, total, indexBytes;
  if (want) {
    ({ buf: h, total } = await readRange(ctx, blob, 0, HEADER + want.indexLength - 1));
    indexBytes = h.subarray(HEADER);
    h = h.subarray(0, HEADER);
  } else {
    ({ buf: h, total } = await readRange(ctx, blob, 0, HEADER - 1));
  }
  const hdr = parseHeader(ctx, h, blob);
  if (hdr.size !== total) verify(`pack ${blob}: header says ${hdr.size} bytes, the blob has ${total}`);
  if (want) {
    if (hdr.L !== want.indexLength || total !== want.size) verify(`pack ${blob}: header does not match the commit's entry`);
  } else {
    if (!hdr.head) verify(`pack ${blob}: not a head pack (it carries no commit)`);
    ({ buf: indexBytes } = await readRange(ctx, blob, HEADER, HEADER + hdr.L - 1));
  }
  const escrow = indexBytes.subarray(0, hdr.E);
  const p = open(ctx, indexBytes.subarray(hdr.E), T_INDEX, `index of pack ${blob}`, Buffer.concat([h, escrow]));
  return parseIndex(p, hdr, blob);
}

// ---------------------------------------------------------------- commit (§7)

const HEX64 = /^[0-9a-f]{64}$/;
const isNum = (v) => Number.isSafeInteger(v) && v >= 0;

function exactMembers(o, names, what, optional = []) {
  if (o === null || typeof o !== 'object' || Array.isArray(o)) verify(`${what}: not a JSON object`);
  const keys = Object.keys(o);
  for (const k of keys) if (!names.includes(k) && !optional.includes(k)) verify(`${what}: unknown member ${JSON.stringify(k)}`);
  for (const k of names) if (!(k in o)) verify(`${what}: no member ${JSON.stringify(k)}`);
}

function checkFileRef(r, what) {
  exactMembers(r, ['mode', 'size', 'sha256', 'chunks'], what);
  if (!isNum(r.mode) || r.mode > 0o777) verify(`${what}: bad mode`);
  if (!isNum(r.size)) verify(`${what}: bad size`);
  if (typeof r.sha256 !== 'string' || !HEX64.test(r.sha256)) verify(`${what}: bad sha256`);
  if (!Array.isArray(r.chunks) || !r.chunks.every((c) => typeof c === 'string' && HEX64.test(c))) verify(`${what}: bad chunks`);
  return { mode: r.mode, size: r.size, sha256: r.sha256, chunks: r.chunks };
}

function parseCommit(ctx, bytes) {
  let c;
  try {
    c = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch {
    verify('commit: not UTF-8 JSON');
  }
  // rootMode and rootMtime: revision 2, together or not at all (§7).
  exactMembers(c, ['format', 'identity', 'keyId', 'root', 'parent', 'parentFormat', 'time', 'bundleHash',
    'lockVersion', 'files', 'bytes', 'added', 'lock', 'receipts', 'packs'], 'commit', ['rootMode', 'rootMtime']);
  if (('rootMode' in c) !== ('rootMtime' in c)) verify('commit: rootMode and rootMtime go together');
  let root = null;
  if ('rootMode' in c) {
    if (!isNum(c.rootMode) || c.rootMode > 0o7777) verify('commit: bad rootMode');
    if (typeof c.rootMtime !== 'string' || !/^(0|-?[1-9][0-9]*)$/.test(c.rootMtime)) verify('commit: bad rootMtime');
    const t = BigInt(c.rootMtime);
    if (t < -(1n << 63n) || t >= 1n << 63n) verify('commit: rootMtime out of range');
    root = { mode: c.rootMode, mtime: t };
  }
  if (c.format !== 'hermesd/v3') verify(`commit: format ${JSON.stringify(c.format)}`);
  if (c.identity !== ctx.identity) auth(`commit: written for ${JSON.stringify(String(c.identity))}, not ${JSON.stringify(ctx.identity)}`);
  if (c.keyId !== ctx.keys.keyId.toString('hex')) auth(`commit: key id ${JSON.stringify(String(c.keyId))} is not this key's`);
  if (typeof c.root !== 'string' || !HEX64.test(c.root)) verify('commit: bad root');
  if (typeof c.parent !== 'string' || (c.parent !== '' && !BLOB_ID.test(c.parent))) verify('commit: bad parent');
  if (!['v1', 'v2', 'v3', ''].includes(c.parentFormat) || (c.parentFormat === '') !== (c.parent === '')) verify('commit: bad parentFormat');
  if (typeof c.bundleHash !== 'string' || !/^0x[0-9a-f]{64}$/.test(c.bundleHash)) verify('commit: bad bundleHash');
  for (const k of ['time', 'lockVersion', 'files', 'bytes', 'added']) if (!isNum(c[k])) verify(`commit: bad ${k}`);
  const lock = c.lock === null ? null : checkFileRef(c.lock, 'commit lock');
  const receipts = c.receipts === null ? null : checkFileRef(c.receipts, 'commit receipts');
  if (!Array.isArray(c.packs)) verify('commit: packs is not an array');
  if (c.packs.length > MAX_PACKS) verify(`commit: ${c.packs.length} packs, over ${MAX_PACKS}`);
  const packs = c.packs.map((p, i) => {
    const what = `commit pack ${i}`;
    // "sha256" (the whole blob's digest) is in commits written before
    // 2026-11-26 only: accepted when well-formed, not used (§7).
    exactMembers(p, ['blobId', 'size', 'endEpoch', 'indexLength'], what, ['sha256']);
    if (typeof p.blobId !== 'string' || !BLOB_ID.test(p.blobId)) verify(`${what}: bad blobId`);
    for (const k of ['size', 'endEpoch', 'indexLength']) if (!isNum(p[k])) verify(`${what}: bad ${k}`);
    if ('sha256' in p && (typeof p.sha256 !== 'string' || !HEX64.test(p.sha256))) verify(`${what}: bad sha256`);
    if (p.indexLength < 36 || p.indexLength > MAX_INDEX || p.size > MAX_PACK || p.size < HEADER + p.indexLength) verify(`${what}: bad lengths`);
    if (i > 0 && !(c.packs[i - 1].blobId < p.blobId)) verify(`${what}: packs not sorted by blob id, or duplicate`);
    return p;
  });
  return { ...c, lock, receipts, packs, rootMeta: root };
}

// ---------------------------------------------------------------- trees (§5)

const utf8 = new TextDecoder('utf-8', { fatal: true });

function checkName(nb, what) {
  if (nb.length < 1 || nb.length > 1024) verify(`${what}: name of ${nb.length} bytes`);
  let s;
  try { s = utf8.decode(nb); } catch { verify(`${what}: name is not UTF-8`); }
  if (s === '.' || s === '..' || /[/\\\0]/.test(s)) verify(`${what}: name ${JSON.stringify(s)} outside the name policy`);
  return s;
}

// checkLinkTarget: a hard link's target path (§5), '/'-joined names.
function checkLinkTarget(tb, what) {
  if (tb.length < 1 || tb.length > 4095) verify(`${what}: link target of ${tb.length} bytes`);
  let t;
  try { t = utf8.decode(tb); } catch { verify(`${what}: link target is not UTF-8`); }
  for (const n of t.split('/')) checkName(enc(n), `${what}: link target`);
  return t;
}

function parseTree(p, id) {
  const what = `tree ${id}`;
  if (p.length < 4) verify(`${what}: ${p.length} bytes`);
  const count = p.readUInt32BE(0);
  // The smallest entry is a symlink of a one-byte name and target: 17 bytes.
  if (count > (p.length - 4) / 17) verify(`${what}: ${count} entries do not fit in ${p.length} bytes`);
  const entries = [];
  let at = 4, prev = null, rev = 0;
  const need = (n) => { if (at + n > p.length) verify(`${what}: truncated entry`); };
  for (let i = 0; i < count; i++) {
    need(2);
    const nl = p.readUInt16BE(at); at += 2;
    need(nl + 3);
    const nb = p.subarray(at, at + nl); at += nl;
    const name = checkName(nb, what);
    if (prev && Buffer.compare(prev, nb) >= 0) verify(`${what}: ${JSON.stringify(name)} out of order or duplicate`);
    prev = nb;
    const type = p[at];
    const mode = p.readUInt16BE(at + 1); at += 3;
    const q = JSON.stringify(name);
    if (type < 0x01 || type > 0x06) verify(`${what}: ${q} has unknown entry type ${type}`);
    // One revision per tree (§5): types 1-2 are revision 1, 3-6 revisions
    // 2 and 3 (a revision 3 tree holds symlinks, 0x06).
    const r = type <= 0x02 ? 1 : 2;
    if (rev && r !== rev) verify(`${what}: ${q}: entries of both revisions in one tree`);
    rev = r;
    if (r === 1 && (mode & ~0o777)) verify(`${what}: ${q} has mode bits beyond 0777`);
    if (r === 2 && (mode & ~0o7777)) verify(`${what}: ${q} has mode bits beyond 07777`);
    if (type === 0x05 && mode !== 0) verify(`${what}: ${q}: a hard link with a mode`);
    if (type === 0x06 && mode !== 0) verify(`${what}: ${q}: a symlink with a mode`);
    let mtime = null;
    if (type === 0x03 || type === 0x04 || type === 0x06) {
      need(8);
      mtime = p.readBigInt64BE(at); at += 8;
    }
    if (type === 0x06) {
      // A symlink (§5, revision 3): its target verbatim, as bytes (it
      // need not be UTF-8), 1 to 4095 of them and no NUL.
      need(2);
      const tl = p.readUInt16BE(at); at += 2;
      need(tl);
      const target = Buffer.from(p.subarray(at, at + tl)); at += tl;
      if (tl < 1 || tl > 4095 || target.includes(0)) verify(`${what}: ${q}: a symlink target of ${tl} bytes no system can create`);
      entries.push({ name, symlink: true, mtime, target });
    } else if (type === 0x02 || type === 0x04) {
      need(32);
      entries.push({ name, dir: true, mode, mtime, id: p.subarray(at, at + 32).toString('hex') });
      at += 32;
    } else if (type === 0x01 || type === 0x03) {
      need(44);
      const size = p.readBigUInt64BE(at);
      const sum = p.subarray(at + 8, at + 40).toString('hex');
      const n = p.readUInt32BE(at + 40); at += 44;
      if (size > BigInt(Number.MAX_SAFE_INTEGER)) verify(`${what}: ${q} of ${size} bytes is beyond this reader`);
      if (n > (p.length - at) / 32) verify(`${what}: ${q} has ${n} chunks that do not fit`);
      const chunks = [];
      for (let j = 0; j < n; j++, at += 32) chunks.push(p.subarray(at, at + 32).toString('hex'));
      entries.push({ name, dir: false, mode, mtime, size: Number(size), sha256: sum, chunks });
    } else {
      // 0x05: another name of a file met earlier in the walk (§5).
      need(42);
      const size = p.readBigUInt64BE(at);
      const sum = p.subarray(at + 8, at + 40).toString('hex');
      const tl = p.readUInt16BE(at + 40); at += 42;
      if (size > BigInt(Number.MAX_SAFE_INTEGER)) verify(`${what}: ${q} of ${size} bytes is beyond this reader`);
      need(tl);
      const link = checkLinkTarget(p.subarray(at, at + tl), `${what}: ${q}`);
      at += tl;
      entries.push({ name, dir: false, mode: 0, mtime: null, size: Number(size), sha256: sum, chunks: [], link });
    }
  }
  if (at !== p.length) verify(`${what}: ${p.length - at} trailing bytes`);
  return entries;
}

// checkFile applies the rules shared by tree file entries and the
// commit's file references, and resolves the chunks in the indexes.
function checkFile(ctx, f, what) {
  if ((f.chunks.length === 0) !== (f.size === 0) || f.chunks.length > f.size) verify(`${what}: ${f.chunks.length} chunks for ${f.size} bytes`);
  if (f.chunks.length === 1 && f.chunks[0] !== f.sha256) verify(`${what}: its one chunk is not its content`);
  let sum = 0;
  const refs = f.chunks.map((id) => {
    const ref = ctx.objects.get(T_CHUNK + id);
    if (!ref) verify(`${what}: chunk ${id} is in no live pack`);
    if (ref.len - OVERHEAD > MAX_CHUNK) verify(`${what}: chunk ${id} of ${ref.len - OVERHEAD} bytes, over ${MAX_CHUNK}`);
    sum += ref.len - OVERHEAD;
    return ref;
  });
  if (sum !== f.size) verify(`${what}: chunks hold ${sum} bytes, the file ${f.size}`);
  return refs;
}

// loadTree walks the tree from id down, collecting directories and files
// with their paths; ancestors guards against a tree containing itself.
async function loadTree(ctx, id, rel, depth, ancestors, out) {
  if (depth > MAX_DEPTH) verify(`${rel || 'root'}: directories nested deeper than ${MAX_DEPTH}`);
  if (ancestors.has(id)) verify(`tree ${id} contains itself`);
  let entries = ctx.trees.get(id);
  if (!entries) {
    const ref = ctx.objects.get(T_TREE + id);
    if (!ref) verify(`tree ${id} is in no live pack`);
    if (ref.len - OVERHEAD > MAX_TREE) verify(`tree ${id} of ${ref.len - OVERHEAD} bytes, over ${MAX_TREE}`);
    const { buf } = await readRange(ctx, ref.blob, ref.off, ref.off + ref.len - 1);
    entries = parseTree(openObject(ctx, buf, ref), id);
    ctx.trees.set(id, entries);
  }
  ancestors.add(id);
  for (const e of entries) {
    const p = rel ? `${rel}/${e.name}` : e.name;
    if (depth === 0 && (e.name === 'bundle.lock.json' || e.name === 'receipts.ndjson')) verify(`root tree holds ${e.name}`);
    if (e.symlink) {
      // Counted nowhere (§8), a leaf; bounded like directories (§11).
      out.symlinks.push({ path: p, target: e.target, mtime: e.mtime });
      if (out.symlinks.length > MAX_SYMLINKS) verify(`the trees hold more than ${MAX_SYMLINKS} symlinks`);
    } else if (e.dir) {
      out.dirs.push({ path: p, mode: e.mode, mtime: e.mtime, depth: depth + 1 });
      if (out.dirs.length > MAX_DIRS) verify(`the trees hold more than ${MAX_DIRS} directories`);
      await loadTree(ctx, e.id, p, depth + 1, ancestors, out);
    } else {
      if (e.link !== undefined) {
        // §5, §9 step 5: a file (not a link) the walk met before, with
        // this size and SHA-256.
        const t = out.byPath.get(e.link);
        if (!t) verify(`${p}: a hard link to ${e.link}, which is no file met before it`);
        if (t.size !== e.size || t.sha256 !== e.sha256) verify(`${p}: a hard link to ${e.link}, whose content is another`);
        out.links.push({ path: p, target: e.link });
      } else {
        out.byPath.set(p, e);
      }
      out.files.push({ ...e, path: p });
      out.bytes += e.size;
      if (out.files.length > ctx.commit.files || out.bytes > ctx.commit.bytes) verify('the trees hold more than the commit counts');
    }
  }
  ancestors.delete(id);
}

// ---------------------------------------------------------------- bundle hash (§8)

function bundleHash(files) {
  if (files.length === 0) return keccak256(enc('stratum/empty-bundle'));
  // JavaScript's default sort compares UTF-16 code units, as §8 asks.
  const paths = files.map((f) => f.path).sort();
  const sums = new Map(files.map((f) => [f.path, f.sha256]));
  const leaves = paths.map((p) => keccak256(Buffer.concat([enc(p), Buffer.from([0]), Buffer.from(sums.get(p), 'hex')])));
  return keccak256(Buffer.concat(leaves));
}

// ---------------------------------------------------------------- restore

// fileMode is the mode a restore gives a file recorded with mode m: as
// hermesd does (§9 step 8), everything but setuid and setgid, which are
// listed in stripped.
function fileMode(ctx, path, m) {
  if (m & 0o6000) ctx.stripped.push(path);
  return m & ~0o6000;
}

// dirMode is the mode a restore gives a directory recorded with mode m: as
// hermesd does without allow_unsafe_dirs (§9 step 8), everything but o+w,
// listed in narrowed.
function dirMode(ctx, path, m) {
  if (m & 0o002) ctx.narrowed.push(path);
  return m & ~0o002;
}

// setTime sets a recorded mtime (ns, a BigInt). node's utimes takes
// seconds as a double: exact to about a microsecond, not a nanosecond.
function setTime(p, ns) {
  if (ns === null || ns === undefined) return; // revision 1: none recorded
  const s = Number(ns) / 1e9;
  fs.utimesSync(p, fs.statSync(p).atime, s);
}

// setLinkTime sets a symlink's own time (lutimes: the link, not what it
// names).
function setLinkTime(p, ns) {
  const s = Number(ns) / 1e9;
  fs.lutimesSync(p, s, s);
}

// writeFile downloads a file's chunks (adjacent ranges of one pack
// coalesced), checks each id and the file's SHA-256, and writes it.
async function writeFile(ctx, dst, f, refs, what) {
  const fd = fs.openSync(dst, 'wx', 0o600);
  try {
    const h = createHash('sha256');
    for (let i = 0; i < refs.length;) {
      let j = i + 1;
      while (j < refs.length && refs[j].blob === refs[i].blob && refs[j].off === refs[j - 1].off + refs[j - 1].len &&
        refs[j].off + refs[j].len - refs[i].off <= MAX_RANGE) j++;
      const start = refs[i].off, end = refs[j - 1].off + refs[j - 1].len;
      const { buf } = await readRange(ctx, refs[i].blob, start, end - 1);
      for (let k = i; k < j; k++) {
        const p = openObject(ctx, buf.subarray(refs[k].off - start, refs[k].off - start + refs[k].len), refs[k]);
        h.update(p);
        for (let n = 0; n < p.length;) n += fs.writeSync(fd, p, n);
      }
      i = j;
    }
    if (h.digest('hex') !== f.sha256) verify(`${what}: content does not match its SHA-256`);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  fs.chmodSync(dst, fileMode(ctx, what, f.mode));
  setTime(dst, f.mtime);
}

async function restore(opts) {
  const ctx = {
    aggregator: opts.aggregator.replace(/\/+$/, ''),
    identity: opts.identity,
    keys: deriveKeys(opts),
    objects: new Map(), // type + id -> { type, id, blob, off, len }
    trees: new Map(),
    stats: { ranges: 0, downloaded: 0 },
    patches: new Map(), // quilt patch id -> Promise<Buffer> (§13)
    patchSizes: new Map(), // of the patches fetched, oldest first
    patchBytes: 0,
    stripped: [],
    narrowed: [],
  };

  const out = path.resolve(opts.out);
  if (fs.existsSync(out)) usage(`${opts.out} already exists`);

  // §9 steps 2-3: the head pack's header, index and commit.
  const head = await openPack(ctx, opts.blob);
  const commitId = sha256(head.commit).toString('hex');
  ctx.commit = parseCommit(ctx, head.commit);
  const index = (entries) => { for (const e of entries) if (!ctx.objects.has(e.type + e.id)) ctx.objects.set(e.type + e.id, e); };
  index(head.entries);
  // Step 4: every listed pack's index.
  for (const p of ctx.commit.packs) {
    if (p.blobId === opts.blob) verify('commit lists its own head pack');
    index((await openPack(ctx, p.blobId, p)).entries);
  }

  // Steps 5-6: the trees, then the counts and bundle hash, before any chunk.
  const tree = { dirs: [], files: [], bytes: 0, byPath: new Map(), links: [], symlinks: [] };
  await loadTree(ctx, ctx.commit.root, '', 0, new Set(), tree);
  if (tree.files.length !== ctx.commit.files || tree.bytes !== ctx.commit.bytes) {
    verify(`the trees hold ${tree.files.length} files and ${tree.bytes} bytes, the commit says ${ctx.commit.files} and ${ctx.commit.bytes}`);
  }
  const bh = '0x' + bundleHash(tree.files).toString('hex');
  if (bh !== ctx.commit.bundleHash) verify(`bundle hash ${bh} of the trees is not the commit's ${ctx.commit.bundleHash}`);
  const top = [['bundle.lock.json', ctx.commit.lock], ['receipts.ndjson', ctx.commit.receipts]].filter(([, r]) => r);
  const plan = [...tree.files.filter((f) => f.link === undefined), ...top.map(([name, r]) => ({ ...r, path: name, mtime: null }))]
    .map((f) => ({ f, refs: checkFile(ctx, f, f.path) }));

  // Steps 7-9 into a new temporary directory, moved into place at the end.
  const tmp = path.join(path.dirname(out), `.${path.basename(out)}.v3reader-${randomBytes(6).toString('hex')}`);
  fs.mkdirSync(tmp, { mode: 0o700 });
  try {
    for (const d of tree.dirs) fs.mkdirSync(path.join(tmp, d.path), { mode: 0o700 });
    for (const { f, refs } of plan) await writeFile(ctx, path.join(tmp, f.path), f, refs, f.path);
    // Hard links once their files exist (§9 step 8).
    for (const l of tree.links) fs.linkSync(path.join(tmp, l.target), path.join(tmp, l.path));
    // Symlinks after every file and link, targets verbatim (a Buffer:
    // bytes as recorded); nothing is written through one afterwards.
    for (const l of tree.symlinks) {
      fs.symlinkSync(l.target, path.join(tmp, l.path));
      setLinkTime(path.join(tmp, l.path), l.mtime);
    }
    for (const d of [...tree.dirs].sort((a, b) => b.depth - a.depth)) {
      fs.chmodSync(path.join(tmp, d.path), dirMode(ctx, d.path, d.mode));
      setTime(path.join(tmp, d.path), d.mtime);
    }
    // The brain directory (§9 step 10): revision 2 records it; revision 1
    // does not, and hermesd restores it as 0755.
    const rm = ctx.commit.rootMeta;
    fs.chmodSync(tmp, rm ? dirMode(ctx, '.', rm.mode) : 0o755);
    if (rm) setTime(tmp, rm.mtime);
    fs.renameSync(tmp, out);
  } catch (e) {
    fs.rmSync(tmp, { recursive: true, force: true, maxRetries: 2 });
    // Read-only directories keep rmSync from emptying them.
    if (fs.existsSync(tmp)) { makeWritable(tmp); fs.rmSync(tmp, { recursive: true, force: true }); }
    throw e;
  }
  return {
    head: opts.blob, commit: commitId, root: ctx.commit.root, parent: ctx.commit.parent,
    parentFormat: ctx.commit.parentFormat, time: ctx.commit.time, bundleHash: bh,
    files: tree.files.length, bytes: tree.bytes, dirs: tree.dirs.length, links: tree.links.length,
    symlinks: tree.symlinks.length, stripped: ctx.stripped, narrowed: ctx.narrowed,
    lock: !!ctx.commit.lock, receipts: !!ctx.commit.receipts, packs: ctx.commit.packs.length + 1,
    ranges: ctx.stats.ranges, downloaded: ctx.stats.downloaded,
  };
}

function makeWritable(dir) {
  try { fs.chmodSync(dir, 0o700); } catch { return; }
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) if (e.isDirectory()) makeWritable(path.join(dir, e.name));
}

// ---------------------------------------------------------------- main

function parseArgs(argv) {
  const o = {};
  const known = ['aggregator', 'blob', 'identity', 'key-file', 'agent-key-file', 'out'];
  for (let i = 0; i < argv.length; i += 2) {
    const k = argv[i]?.replace(/^--/, '');
    if (!known.includes(k) || argv[i + 1] === undefined) usage(`usage: restore.mjs --aggregator URL --blob ID --identity NAME (--key-file F | --agent-key-file F) --out DIR`);
    o[k] = argv[i + 1];
  }
  for (const k of ['aggregator', 'blob', 'identity', 'out']) if (!o[k]) usage(`missing --${k}`);
  if (!!o['key-file'] === !!o['agent-key-file']) usage('give exactly one of --key-file and --agent-key-file');
  if (!/^https?:\/\//.test(o.aggregator)) usage('--aggregator must be an http(s) URL');
  if (!BLOB_ID.test(o.blob)) usage('--blob is not a Walrus blob id');
  const idb = enc(o.identity);
  if (idb.length < 1 || idb.length > 1024 || o.identity.includes('\0')) usage('--identity must be 1 to 1024 bytes without NUL');
  return {
    aggregator: o.aggregator, blob: o.blob, identity: o.identity, out: o.out,
    masterKey: o['key-file'] ? readKeyFile(o['key-file'], 'key file') : undefined,
    agentKey: o['agent-key-file'] ? readKeyFile(o['agent-key-file'], 'agent key file') : undefined,
  };
}

// fetch keeps idle connections open for seconds after the last request;
// the result is written synchronously and the process exits at once.
let code = 0;
try {
  const summary = await restore(parseArgs(process.argv.slice(2)));
  fs.writeSync(1, JSON.stringify(summary) + '\n');
} catch (e) {
  code = e instanceof ReaderError ? e.code : 1;
  const msg = String(e?.message ?? e).replace(/[\r\n]+/g, ' ');
  fs.writeSync(2, `v3reader: ${msg}\n`);
}
process.exit(code);
