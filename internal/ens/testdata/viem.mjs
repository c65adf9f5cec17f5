// Resolves text records with viem (pinned in
// internal/devchain/contracts/package.json), for the peer tests: reads
// {"rpc", "universalResolver", "cases": [{"name", "key"}]} on stdin and
// prints one result per case: {"value": string | null} or {"error": string}.
// viem resolves every name through the Universal Resolver
// (resolveWithGateways with its local batch gateway), as wallets using it do.
import { createPublicClient, http } from 'viem'
import { normalize } from 'viem/ens'

const chunks = []
for await (const c of process.stdin) chunks.push(c)
const task = JSON.parse(Buffer.concat(chunks).toString('utf8'))
const client = createPublicClient({ transport: http(task.rpc, { timeout: 10_000 }) })
const out = []
for (const c of task.cases) {
  try {
    const value = await client.getEnsText({
      name: normalize(c.name),
      key: c.key,
      universalResolverAddress: task.universalResolver,
    })
    out.push({ value })
  } catch (err) {
    out.push({ error: String(err.shortMessage || err.message).split('\n')[0] })
  }
}
process.stdout.write(JSON.stringify(out))
