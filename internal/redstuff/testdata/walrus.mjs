// Walrus's own code (installed into .deps/walrus by
// scripts/fetch-walrus-sdk.sh) for the Go cross-checks: walrus-core's RS2
// encoder compiled to WebAssembly (@mysten/walrus-wasm 0.3.0) and the
// quilt layout of @mysten/walrus 1.2.13. The Go test copies this file
// beside node_modules and runs it with a JSON list of tasks on stdin; it
// prints one JSON result per task. Bytes travel as files (paths given by
// the test) or base64.
//
//   {op: "id", shards, file}       → {id, root}: compute_metadata
//   {op: "slivers", shards, file}  → {id, primary: [b64], secondary: [b64]}:
//                                    encode, each sliver pair's BCS SliverData
//   {op: "quilt", shards, blobs: [{identifier, file, tags}], out}
//                                  → encodeQuilt, the quilt written to out,
//                                    {id, patches: [{identifier, start, end, patchId}]}
import fs from 'node:fs';
import { BlobEncoder } from '@mysten/walrus-wasm';
import { encodeQuilt } from '@mysten/walrus';

// encodeQuiltPatchId is not exported from the package root.
const quilts = await import(new URL('node_modules/@mysten/walrus/dist/utils/quilts.mjs', `file://${process.cwd()}/`));

const b64url = (b) => Buffer.from(b).toString('base64url');
const b64 = (b) => Buffer.from(b).toString('base64');

const encoders = new Map();
function encoder(shards) {
	if (!encoders.has(shards)) encoders.set(shards, new BlobEncoder(shards));
	return encoders.get(shards);
}

function sourceSymbols(n) {
	const f = Math.floor((n - 1) / 3);
	return { p: n - 2 * f, s: n - f };
}

function uleb(n) {
	let k = 1;
	while (n >= 0x80) {
		n = Math.floor(n / 128);
		k++;
	}
	return k;
}

function run(task) {
	switch (task.op) {
		case 'id': {
			const [id, root] = encoder(task.shards).compute_metadata(new Uint8Array(fs.readFileSync(task.file)));
			return { id: b64url(id), root: b64(root.Digest) };
		}
		case 'slivers': {
			const data = new Uint8Array(fs.readFileSync(task.file));
			const n = task.shards;
			const { p, s } = sourceSymbols(n);
			const ps = p * s;
			let z = Math.max(1, Math.ceil(Math.max(data.length, 1) / ps));
			z += z % 2;
			// BCS SliverData: symbols {data: vector<u8>, symbol_size: u16}, index: u16.
			const size = (len) => uleb(len) + len + 4;
			const prim = Array.from({ length: n }, () => new Uint8Array(size(s * z)));
			const sec = Array.from({ length: n }, () => new Uint8Array(size(p * z)));
			const [meta] = encoder(n).encode(data, prim, sec);
			return { id: b64url(meta.blob_id), primary: prim.map(b64), secondary: sec.map(b64) };
		}
		case 'quilt': {
			const blobs = task.blobs.map((b) => ({
				identifier: b.identifier,
				contents: new Uint8Array(fs.readFileSync(b.file)),
				tags: b.tags ?? undefined,
			}));
			const { quilt, index } = encodeQuilt({ blobs, numShards: task.shards, encodingType: 'RS2' });
			fs.writeFileSync(task.out, quilt);
			const [id] = encoder(task.shards).compute_metadata(quilt);
			const quiltId = b64url(id);
			return {
				id: quiltId,
				patches: index.patches.map((p) => ({
					identifier: p.identifier,
					start: p.startIndex,
					end: p.endIndex,
					patchId: quilts.encodeQuiltPatchId({
						quiltId,
						patchId: { version: 1, startIndex: p.startIndex, endIndex: p.endIndex },
					}),
				})),
			};
		}
		default:
			throw new Error(`unknown op ${task.op}`);
	}
}

const tasks = JSON.parse(fs.readFileSync(0, 'utf8'));
const out = [];
for (const t of tasks) {
	try {
		out.push(run(t));
	} catch (e) {
		out.push({ error: String(e && e.stack ? e.stack : e) });
	}
}
process.stdout.write(JSON.stringify(out));
