// Drives the official Seal SDK (@mysten/seal, installed by
// scripts/fetch-seal-sdk.sh) for the Go interop tests. The Go test copies
// this file into the SDK directory so bare imports resolve there, writes a
// JSON array of tasks on stdin and reads a JSON array of results on stdout.
//
// SealClient reads key-server objects through a Sui client. No full node is
// involved: `stubSuiClient` answers the two core calls it makes
// (getObject, getDynamicField) in process, with the BCS of KeyServer and
// KeyServerV1 objects built from the task's servers. Key requests are real
// HTTP calls to the Go key servers on 127.0.0.1.
import { SealClient, SessionKey, EncryptedObject, DemType } from '@mysten/seal';
import { Transaction } from '@mysten/sui/transactions';
import { Ed25519Keypair } from '@mysten/sui/keypairs/ed25519';
import { bcs } from '@mysten/sui/bcs';
import { fromHex, toHex, fromBase64, toBase64 } from '@mysten/bcs';

const KeyServerMove = bcs.struct('KeyServer', {
	id: bcs.Address,
	firstVersion: bcs.u64(),
	lastVersion: bcs.u64(),
});
const KeyServerMoveV1 = bcs.struct('KeyServerV1', {
	name: bcs.string(),
	url: bcs.string(),
	keyType: bcs.u8(),
	pk: bcs.byteVector(),
});

function stubSuiClient(servers) {
	const byId = new Map(servers.map((s) => [s.objectId, s]));
	return {
		core: {
			async getObject({ objectId }) {
				const s = byId.get(objectId);
				if (!s) {
					// A package: SessionKey.create and encrypt require version 1.
					return { object: { objectId, version: '1' } };
				}
				const content = KeyServerMove.serialize({ id: objectId, firstVersion: 1, lastVersion: 1 }).toBytes();
				return { object: { objectId, version: '1', content } };
			},
			async getDynamicField({ parentId }) {
				const s = byId.get(parentId);
				if (!s) throw new Error(`no key server ${parentId}`);
				const value = KeyServerMoveV1.serialize({
					name: `go-${parentId.slice(-4)}`,
					url: s.url ?? 'http://127.0.0.1:9',
					keyType: 0,
					pk: fromHex(s.pk),
				}).toBytes();
				return { dynamicField: { value: { bcs: value } } };
			},
		},
	};
}

function client(task) {
	return new SealClient({
		suiClient: stubSuiClient(task.servers),
		serverConfigs: task.servers.map((s) => ({ objectId: s.objectId, weight: s.weight })),
		verifyKeyServers: !!task.verifyKeyServers,
		timeout: 20000,
	});
}

function approveTx(task, id) {
	const tx = new Transaction();
	tx.moveCall({
		target: `${task.packageId}::${task.module}::${task.function ?? 'seal_approve'}`,
		arguments: [tx.pure.vector('u8', fromHex(id))],
	});
	return tx.build({ onlyTransactionKind: true });
}

const ops = {
	async encrypt(task) {
		const { encryptedObject, key } = await client(task).encrypt({
			threshold: task.threshold,
			packageId: task.packageId,
			id: task.id,
			data: fromBase64(task.data),
			aad: task.aad == null ? undefined : fromBase64(task.aad),
			demType: task.dem === 'hmac' ? DemType.Hmac256Ctr : DemType.AesGcm256,
		});
		return { object: toBase64(encryptedObject), key: toHex(key) };
	},

	async decrypt(task) {
		const keypair = Ed25519Keypair.fromSecretKey(task.suiKey);
		const suiClient = stubSuiClient(task.servers);
		const obj = EncryptedObject.parse(fromBase64(task.object));
		const sessionKey = await SessionKey.create({
			address: keypair.getPublicKey().toSuiAddress(),
			packageId: task.packageId,
			ttlMin: 10,
			signer: keypair,
			suiClient,
		});
		const txBytes = await approveTx(task, obj.id);
		const plaintext = await client(task).decrypt({
			data: fromBase64(task.object),
			sessionKey,
			txBytes,
			checkShareConsistency: !!task.checkShareConsistency,
		});
		return { plaintext: toBase64(plaintext) };
	},

	// Sui primitives the Go side must reproduce byte for byte.
	async sui(task) {
		const keypair = Ed25519Keypair.fromSecretKey(task.suiKey);
		const { signature } = await keypair.signPersonalMessage(fromBase64(task.message));
		const txBytes = await approveTx(task, task.id);
		return {
			address: keypair.getPublicKey().toSuiAddress(),
			exported: keypair.getSecretKey(),
			signature,
			ptb: toBase64(txBytes.slice(1)),
			kind: txBytes[0],
		};
	},

	// The SDK's own check of user secret keys (internal module, by path).
	async verifyKeys(task) {
		const { BonehFranklinBLS12381Services } = await import('./node_modules/@mysten/seal/dist/ibe.mjs');
		const { G1Element, G2Element } = await import('./node_modules/@mysten/seal/dist/bls12381.mjs');
		return {
			valid: task.keys.map((k) =>
				BonehFranklinBLS12381Services.verifyUserSecretKey(
					G1Element.fromBytes(fromHex(k.usk)),
					k.fullId,
					G2Element.fromBytes(fromHex(k.pk)),
				),
			),
		};
	},
};

async function main() {
	const chunks = [];
	for await (const c of process.stdin) chunks.push(c);
	const tasks = JSON.parse(Buffer.concat(chunks).toString('utf8'));
	const results = [];
	for (const task of tasks) {
		try {
			results.push(await ops[task.op](task));
		} catch (e) {
			results.push({ error: `${e?.constructor?.name ?? 'Error'}: ${e?.message ?? e}` });
		}
	}
	process.stdout.write(JSON.stringify(results));
}

main().catch((e) => {
	console.error(String(e?.stack ?? e));
	process.exit(1);
});
