// Builds the reference runtime's key-request transaction offline with the
// official SDK (@mysten/sui, installed beside @mysten/seal by
// scripts/fetch-seal-sdk.sh): <package>::allowlist::seal_approve(id,
// allowlist), the allowlist as a shared-object reference (what tx.object
// resolves it to through a full node). Reads {packageId, id (hex),
// allowlist, version} on stdin; prints the PTB's BCS in base64 (the
// transaction kind's bytes without its leading tag) and that tag.
import { Transaction } from '@mysten/sui/transactions';
import { fromHex, toBase64 } from '@mysten/bcs';

const chunks = [];
for await (const c of process.stdin) chunks.push(c);
const task = JSON.parse(Buffer.concat(chunks).toString('utf8'));
const tx = new Transaction();
tx.moveCall({
	target: `${task.packageId}::allowlist::seal_approve`,
	arguments: [
		tx.pure.vector('u8', fromHex(task.id)),
		tx.sharedObjectRef({ objectId: task.allowlist, initialSharedVersion: task.version, mutable: false }),
	],
});
const bytes = await tx.build({ onlyTransactionKind: true });
process.stdout.write(JSON.stringify({ kind: bytes[0], ptb: toBase64(bytes.slice(1)) }));
