// Compiles the contracts in this directory with the pinned solc (solc-js)
// into truffle-style artifacts: node compile.mjs TOOLS_DIR OUT_DIR.
// TOOLS_DIR holds node_modules/solc (scripts/fetch-ens-tools.sh installs
// it); every artifact records the sha256 of its source, which
// internal/devchain checks against the committed source before using it.
import { createHash } from 'node:crypto'
import { readFileSync, readdirSync, writeFileSync, renameSync, mkdirSync } from 'node:fs'
import { createRequire } from 'node:module'
import { basename, dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const [toolsDir, outDir] = process.argv.slice(2)
if (!toolsDir || !outDir) {
  console.error('usage: node compile.mjs TOOLS_DIR OUT_DIR')
  process.exit(2)
}
const require = createRequire(join(resolve(toolsDir), 'package.json'))
const solc = require('solc')
const here = dirname(fileURLToPath(import.meta.url))
const files = readdirSync(here).filter((f) => f.endsWith('.sol')).sort()
const sources = {}
for (const f of files) sources[f] = { content: readFileSync(join(here, f), 'utf8') }
const input = {
  language: 'Solidity',
  sources,
  settings: {
    optimizer: { enabled: true, runs: 200 },
    evmVersion: 'cancun',
    metadata: { bytecodeHash: 'none' },
    outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object', 'evm.deployedBytecode.object'] } },
  },
}
const out = JSON.parse(solc.compile(JSON.stringify(input)))
const errors = (out.errors || []).filter((e) => e.severity === 'error')
for (const e of out.errors || []) console.error(e.formattedMessage)
if (errors.length > 0) process.exit(1)
mkdirSync(outDir, { recursive: true })
for (const f of files) {
  const name = basename(f, '.sol')
  const c = out.contracts[f]?.[name]
  if (!c) {
    console.error(`compile.mjs: ${f} has no contract ${name}`)
    process.exit(1)
  }
  const artifact = {
    contractName: name,
    sourceName: f,
    sourceSha256: createHash('sha256').update(sources[f].content).digest('hex'),
    compiler: solc.version(),
    abi: c.abi,
    bytecode: '0x' + c.evm.bytecode.object,
    deployedBytecode: '0x' + c.evm.deployedBytecode.object,
  }
  const dest = join(outDir, name + '.json')
  writeFileSync(dest + '.tmp', JSON.stringify(artifact, null, 1) + '\n')
  renameSync(dest + '.tmp', dest)
}
console.log(`compiled ${files.length} contracts with solc ${solc.version()} into ${outDir}`)
