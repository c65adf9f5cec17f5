package repo

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/hash"
)

var printVectors = flag.Bool("printvectors", false, "print the format document's test vectors")

// counterReader yields the bytes 00 01 02 ... ff 00 01 ...: the nonces of
// the test vectors.
type counterReader struct{ n byte }

func (c *counterReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = c.n
		c.n++
	}
	return len(p), nil
}

// vectorBrain is the tiny brain of docs/format-v3.md §10.
func vectorBrain(t testing.TB) string {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"system.md":            "You are a test agent.\n",
		"skills/reentrancy.md": "---\nname: reentrancy\n---\nLook for re-entrant calls.\n",
		"notes/":               "",
	})
	for p, m := range map[string]os.FileMode{"system.md": 0o644, "skills/reentrancy.md": 0o600, "skills": 0o755, "notes": 0o700, ".": 0o755} {
		if err := os.Chmod(filepath.Join(dir, p), m); err != nil {
			t.Fatal(err)
		}
	}
	// Times last: each entry made in a directory moved its time.
	for p, ns := range vectorTimes {
		if err := os.Chtimes(filepath.Join(dir, p), time.Time{}, time.Unix(0, ns)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// vectorTimes are the tiny brain's modification times (ns since the
// epoch), the root's included.
var vectorTimes = map[string]int64{
	"system.md":            1700000000_000000000,
	"skills/reentrancy.md": 1700000001_500000000,
	"skills":               1700000002_000000000,
	"notes":                1700000003_000000000,
	".":                    1700000004_250000000,
}

// vectorSnapshot builds the vector head pack: one reader and one sealer,
// so object order and nonces are fixed.
func vectorSnapshot(t testing.TB) (*Keys, *dirStore, *Result) {
	keys := testKeys(t, testIdentity)
	keys.rand = &counterReader{}
	st := newDirStore(t)
	b := &Builder{Keys: keys, Sink: st, SpoolDir: t.TempDir(), MaxPackSize: 10 << 20, Workers: 1}
	res, err := b.Snapshot(context.Background(), SnapshotInput{
		Brain: vectorBrain(t), Index: NewIndex(), Time: time.UnixMilli(1700000000000), LockVersion: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	return keys, st, res
}

// printDocVectors prints the document's vectors (-printvectors, with
// TestVectors), to write them into docs/format-v3.md after a change.
func printDocVectors(t *testing.T) {
	agent := DeriveAgentKey(testMaster, testIdentity)
	ab := agent.Bytes()
	fmt.Printf("agent key   %x\n", ab)
	fmt.Printf("object key  %x\n", subkey(ab, infoObjectKey, 32))
	fmt.Printf("key id      %s\n", agent.ID())
	keys, st, res := vectorSnapshot(t)
	pol, _ := keys.Polynomial()
	fmt.Printf("polynomial  %#x\n", uint64(pol))
	for id, tr := range res.Trees {
		b, _ := tr.Encode()
		fmt.Printf("tree %s\n  %x\n", id, b)
	}
	blob := st.blob(t, res.Head.BlobID)
	fmt.Printf("head pack %s (%d bytes, sha256 %x)\n%s\n", res.Head.BlobID, len(blob), sha256.Sum256(blob), hex.EncodeToString(blob))
	enc, _ := res.Commit.Encode()
	fmt.Printf("commit %s\n", enc)
	fmt.Printf("commit id %s\n", res.CommitID)
	h, ix, err := keys.OpenIndex(blob[:HeaderSize], blob[HeaderSize:HeaderSize+res.Head.IndexLength])
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("header %+v\nindex plaintext %x\n", h, ix.Encode())
	for _, e := range ix.Entries {
		off := h.DataOffset() + e.Offset
		fmt.Printf("object %s %s at %d+%d: %x\n", e.Type, e.ID, off, e.Length, blob[off:off+e.Length])
	}
}

// The document's vectors (docs/format-v3.md §12), asserted exactly.
const (
	vecAgentKey    = "3dcc4590bb60965c3b24b860f1724e9203c9fde8c681a8aeaecc3507e2827688"
	vecObjectKey   = "2aa95750dff2a82e0f43897c0101b4c60a60c57f5f11881c380b61ef0ba09947"
	vecKeyID       = "561b1e386fb6b3e1"
	vecPoly        = 0x2255c2e83935b7
	vecBundle      = "0x686d75608202ced471e2bafb0c9a0212e40808a8c359e375c62f1f4129893276"
	vecNotesID     = "df3f619804a92fdb4057192dc43dd748ea778adc52bc498ce80524c014b81119"
	vecSkillsID    = "100476149b0b758833e1256cb0c13d6fa77543b442fd75a40b66d4efd0483112"
	vecRootID      = "0f106ba4da165c2fbd3bfbbdbd2027628ca123a03e3ca964d225e231333bb01c"
	vecCommitID    = "922f7cfdba94e42d2d0fbffbe84085fbb4f55a660cc6291099647bf86b42893a"
	vecPackSHA     = "214abffe9659da1f7673454692b85ac167c37bc2e1be0225c68fe55a4c366cfd"
	vecHeader      = "48524d5303010000561b1e386fb6b3e1000002af000000000000020f"
	vecSystemChunk = "0c0d0e0f1011121314151617bebd1b1d8c142aec8e43d3546eb3e2a516b024cfc030f82139ab83939f651b4554eb72c5c740"
	vecCommit      = `{"format":"hermesd/v3","identity":"auditor.hermes.eth","keyId":"561b1e386fb6b3e1","root":"0f106ba4da165c2fbd3bfbbdbd2027628ca123a03e3ca964d225e231333bb01c","rootMode":493,"rootMtime":"1700000004250000000","parent":"","parentFormat":"","time":1700000000000,"bundleHash":"0x686d75608202ced471e2bafb0c9a0212e40808a8c359e375c62f1f4129893276","lockVersion":1,"files":2,"bytes":74,"added":527,"lock":null,"receipts":null,"packs":[]}`
)

var vecTrees = map[string]string{
	vecNotesID:  "00000000",
	vecSkillsID: "00000001000d7265656e7472616e63792e6d6403018017979cfe8f922f000000000000000034887d4c26df1a103714828d7001b32ffc432e13d877956b62e983c74a6145a2ff00000001887d4c26df1a103714828d7001b32ffc432e13d877956b62e983c74a6145a2ff",
	vecRootID:   "0000000300056e6f7465730401c017979cfee8fa5e00df3f619804a92fdb4057192dc43dd748ea778adc52bc498ce80524c014b811190006736b696c6c730401ed17979cfead5f9400100476149b0b758833e1256cb0c13d6fa77543b442fd75a40b66d4efd0483112000973797374656d2e6d640301a417979cfe362a0000000000000000001673e9074adee429622ed5c87d868ba3d48275f7a96e83611a46549b69e4685be90000000173e9074adee429622ed5c87d868ba3d48275f7a96e83611a46549b69e4685be9",
}

const vecIndex = "0000000501887d4c26df1a103714828d7001b32ffc432e13d877956b62e983c74a6145a2ff0000000000000000000000500173e9074adee429622ed5c87d868ba3d48275f7a96e83611a46549b69e4685be900000000000000500000003202df3f619804a92fdb4057192dc43dd748ea778adc52bc498ce80524c014b8111900000000000000820000002002100476149b0b758833e1256cb0c13d6fa77543b442fd75a40b66d4efd048311200000000000000a200000086020f106ba4da165c2fbd3bfbbdbd2027628ca123a03e3ca964d225e231333bb01c0000000000000128000000e7000001aa7b22666f726d6174223a226865726d6573642f7633222c226964656e74697479223a2261756469746f722e6865726d65732e657468222c226b65794964223a2235363162316533383666623662336531222c22726f6f74223a2230663130366261346461313635633266626433626662626462643230323736323863613132336130336533636139363464323235653233313333336262303163222c22726f6f744d6f6465223a3439332c22726f6f744d74696d65223a2231373030303030303034323530303030303030222c22706172656e74223a22222c22706172656e74466f726d6174223a22222c2274696d65223a313730303030303030303030302c2262756e646c6548617368223a22307836383664373536303832303263656434373165326261666230633961303231326534303830386138633335396533373563363266316634313239383933323736222c226c6f636b56657273696f6e223a312c2266696c6573223a322c226279746573223a37342c226164646564223a3532372c226c6f636b223a6e756c6c2c227265636569707473223a6e756c6c2c227061636b73223a5b5d7d"

const vecPack = "48524d5303010000561b1e386fb6b3e1000002af000000000000020f3c3d3e3f404142434445464732edfc353c4475c2feacb710865a997f126144007c417bce82561647967bd1db4fc19efcf40d95abd42ec49f3c1b46ea3f8b5a18fcc244a3724b7b1337e622b0fa530ca46088865852174ff61aa3787815335cb651b0094cd0696115f3d3fe703f592787b734d780d9abe38c09c81a29ce1c65bc3dc6def3c8754dcf3f05eef393184d66851f4acb99ef3dbf9c25e0369d96a0a048de800ba6aabc6393103d356f5b19d31bc27c6f6b7f8d7219a00677c5b9068f23912f0979f71ea02c18a766b3498e7b6eb2eaacc2871727b3a319bc81b92c9eab3d8aa9b46bb4dcadd63cd240147f9f5819e723006664265e1ed6a86d6cc6aeb892421090e7bb75c3d901849585c39dc5fb725d0c31203926c34c1a4b532d1f0e98986f409b6569c98e35138a7199aca4b86493e2c0fd972776510f56ffb6c40a99ed2633af36965b9db597278ab71ab3a93bd682d9ebfb1214de365afeedb6994589a1faee2b9b1ce2496da1fd0111913010fdbb4d35467cc1bd799ac584b30376aa6c09c4d988f0e5c55193a1aba07b38aceb7eaedd32eeb07b3f1ef8f4a994833a965453662d530af1af4f36ac10bb1b4e0760b58426d18fa67d3a72fa2498dcbd2dedb55ca9bb5199bf9928443fadfb6fac15ebe3451bccd6b6ed4ec7c04b805f274b6f0562f65c39a7c9e6d8bad1108cb44f74486e71df4e33548ed3487da3aa4522b957ffca23443712bc7a41a104b32dee96576e7476ab72994c93171063a8ddd90a700cf534515c4048870bcb8f3d54c81e85c774583c278f6e1d4d33bdfde2923fb5b7d79f3755248a42bdfacea923b1cb4c55c0dda976f86f1c1215508c4f8d263e4b4557acc386d1b2beec5f732265b50e3506030b51832d4212d8c38f175c52a811e570169412e31c2aa6ddbbd4f1ecf58089edcfe12f927c1cacfa2073f8deb6165ae6bcd51bf147000102030405060708090a0b95e7c9c42f719d404979e037e79745337b22b11dbf38ec90a89ba07cfee4a9c1eed4de30fa3afbf1e994827c8090992154300799a321aafeb1f1ae047ebe4c4777b2f70d0c0d0e0f1011121314151617bebd1b1d8c142aec8e43d3546eb3e2a516b024cfc030f82139ab83939f651b4554eb72c5c74018191a1b1c1d1e1f202122230a36d2bf21e46a58eb362d0c07ec95a1ef411e642425262728292a2b2c2d2e2feffe7bcc195c5e17d39ede3fa9ba5fb44528cc567566776e9a09bca6ecf29cc0f3e3dc5f383c55eb0717c62a3be907c19e35cd5a8dde2a38c6708fd7e168a1d07985d2a7548aaa726c5cd8a99c1f4efea9780216d54a53a1df030b5f98b77710f02bfa48cc93d19929783d8e690a093a885215a5e451a73f1677303132333435363738393a3b1b61d1d20d0aa68e884200a2cbf1435e5991ecffdceb9d2a53254275da848f749b141a98593ca3f96b610c53f8ddf2666d3122f827d5fe0ff61ebd0e2e38c3280a67c7db998aa283a75693f117dac1a8c92e461e7d7642450d8d15c1a980e003572ab739b73b4b588b295e0c738315b6583659d3a584e79101d5384144a58881c1da8a20c48492717bc16c615f78affeb11234556feb3b1c6e5223772837eae3a0a9ab321a7061104b897a42da52f7333883db66f1442325c2548246dc7899ea9c8d4eab9d52a0459fb14dd17680edfce4e8361b624f2b2e218e11"

// The document's revision 1 fixture (docs/format-v3.md §12.2): the tiny
// brain as hermesd wrote it before trees recorded times, special bits and
// links. No writer produces it any more; every reader must restore it.
const (
	vecBundle1      = "0x686d75608202ced471e2bafb0c9a0212e40808a8c359e375c62f1f4129893276"
	vecNotesID1     = "df3f619804a92fdb4057192dc43dd748ea778adc52bc498ce80524c014b81119"
	vecSkillsID1    = "5361d1372e6daebbf6ad270d225b88d0f79ab11102f4c1ef4064c13c72416c62"
	vecRootID1      = "32886d0f37c3cb29904b5eb323b919f4deb5ad1d1e2601323419a93dc6f00aa5"
	vecCommitID1    = "e61f112ac5c50c9283ad9955e34c4adffe1f6d2e94ba3be3b2e6f0bcf48b9728"
	vecPackSHA1     = "5594775ed8d5436083a903ec89761bffea964f8279ac70b427a9b153a3909932"
	vecHeader1      = "48524d5303010000561b1e386fb6b3e10000027e00000000000001ef"
	vecSystemChunk1 = "0c0d0e0f1011121314151617bebd1b1d8c142aec8e43d3546eb3e2a516b024cfc030f82139ab83939f651b4554eb72c5c740"
	vecCommit1      = `{"format":"hermesd/v3","identity":"auditor.hermes.eth","keyId":"561b1e386fb6b3e1","root":"32886d0f37c3cb29904b5eb323b919f4deb5ad1d1e2601323419a93dc6f00aa5","parent":"","parentFormat":"","time":1700000000000,"bundleHash":"0x686d75608202ced471e2bafb0c9a0212e40808a8c359e375c62f1f4129893276","lockVersion":1,"files":2,"bytes":74,"added":495,"lock":null,"receipts":null,"packs":[]}`
)

var vecTrees1 = map[string]string{
	vecNotesID1: "00000000",
	vecSkillsID1: "00000001000d7265656e7472616e63792e6d640101800000000000000034887d4c26df1a103714828d7001b32ffc432e13d8" +
		"77956b62e983c74a6145a2ff00000001887d4c26df1a103714828d7001b32ffc432e13d877956b62e983c74a6145a2ff",
	vecRootID1: "0000000300056e6f7465730201c0df3f619804a92fdb4057192dc43dd748ea778adc52bc498ce80524c014b811190006736b696c6c730201ed5361d1372e6daebbf6ad270d225b88d0f79ab11102f4c1ef4064c13c72416c62000973797374656d2e6d64" +
		"0101a4000000000000001673e9074adee429622ed5c87d868ba3d48275f7a96e83611a46549b69e4685be90000000173e9074adee429622ed5c87d868ba3d48275f7a96e83611a46549b69e4685be9",
}

const vecIndex1 = "0000000501887d4c26df1a103714828d7001b32ffc432e13d877956b62e983c7" +
	"4a6145a2ff0000000000000000000000500173e9074adee429622ed5c87d868b" +
	"a3d48275f7a96e83611a46549b69e4685be900000000000000500000003202df" +
	"3f619804a92fdb4057192dc43dd748ea778adc52bc498ce80524c014b8111900" +
	"0000000000008200000020025361d1372e6daebbf6ad270d225b88d0f79ab111" +
	"02f4c1ef4064c13c72416c6200000000000000a20000007e0232886d0f37c3cb" +
	"29904b5eb323b919f4deb5ad1d1e2601323419a93dc6f00aa500000000000001" +
	"20000000cf000001797b22666f726d6174223a226865726d6573642f7633222c" +
	"226964656e74697479223a2261756469746f722e6865726d65732e657468222c" +
	"226b65794964223a2235363162316533383666623662336531222c22726f6f74" +
	"223a223332383836643066333763336362323939303462356562333233623931" +
	"3966346465623561643164316532363031333233343139613933646336663030" +
	"616135222c22706172656e74223a22222c22706172656e74466f726d6174223a" +
	"22222c2274696d65223a313730303030303030303030302c2262756e646c6548" +
	"617368223a223078363836643735363038323032636564343731653262616662" +
	"3063396130323132653430383038613863333539653337356336326631663431" +
	"3239383933323736222c226c6f636b56657273696f6e223a312c2266696c6573" +
	"223a322c226279746573223a37342c226164646564223a3439352c226c6f636b" +
	"223a6e756c6c2c227265636569707473223a6e756c6c2c227061636b73223a5b" +
	"5d7d"

const vecPack1 = "48524d5303010000561b1e386fb6b3e10000027e00000000000001ef3c3d3e3f" +
	"404142434445464732edfc353c4475c2feacb710865a997f126144007c417bce" +
	"82561647967bd1db4fc19efcf40d95abd42ec49f3c1b46ea3f8b5a18fcc244a3" +
	"724b7b1337e622b0fa530ca46088865852174ff61aa3787815335cb651b0094c" +
	"d0696115f3d3fe703f592787b734d780d9abe38c09c81a29ce1c65bc3dc6def3" +
	"c8754dcf3f05eef393184d66851f4acb99ef3dbfdf40471528f07b938d92826a" +
	"343009dcc3ffcf902f52ad9850c069bcc976d00219a00677c5b9068f23912ff1" +
	"79ca86a687f572f1b564fede602c739254d503a90e830314d75f10d5a7c84113" +
	"0d6bb4dcadd63cd248147f9f7019e723d36664265e1ed6a86d6cc6aeb8924210" +
	"90e7bb75c3d901849585c39dc5fb725d0c31203926c34c1a4b532d1f0e98986f" +
	"409b6569c98e35138a7199aca4b86493e2c0fd972776510f56ffb6c40a99ed26" +
	"33af36965b9db597278ab719e7a033d68488b9ac4446db605bfeb2edcd4289f2" +
	"fdee7ccb4bb2406eafad074d973314aeec1d61447cc0e82892c082e40575a668" +
	"02c48cd8f5b09703c2f1fda07b38aee563bffe29a8ef7b2706e3b7e4c4943b8d" +
	"667160295f1bf1af4f25b702ff42135272bf8123d48fa67d3a72fa248ac0af71" +
	"aea54ca9ab1fc6d5da770e6df6ab3aba5795ba53419894a4ef5ed5de0a91527e" +
	"197c5a61a30d6ff5c9b5d1ebd1128db606621a232f83436e7fdc95193aaabf40" +
	"39b95daf9f72453010bd7048a055e17ff88d44672977a1429e0e83471e3db8d6" +
	"da43665aa4680c4e5a118612d0887717980e91cf255d7631df3840106eacf5e1" +
	"9d28b5b7d79f375550d55ebbffcdeb23f99f0312cfc4b160a9774855551ec214" +
	"89222e020c42a2b4f9cd4c1c48b8481075894de80609e99c75c7000102030405" +
	"060708090a0b95e7c9c42f719d404979e037e79745337b22b11dbf38ec90a89b" +
	"a07cfee4a9c1eed4de30fa3afbf1e994827c8090992154300799a321aafeb1f1" +
	"ae047ebe4c4777b2f70d0c0d0e0f1011121314151617bebd1b1d8c142aec8e43" +
	"d3546eb3e2a516b024cfc030f82139ab83939f651b4554eb72c5c74018191a1b" +
	"1c1d1e1f202122230a36d2bf21e46a58eb362d0c07ec95a1ef411e6424252627" +
	"28292a2b2c2d2e2feffe7bcc195c5e17d39ede3fa9ba5fb44528cc54756660f9" +
	"06f73334c3c614bdbfc50345283fc914c64118830422506d009dbb7cc9408095" +
	"12e2990728f54853bece3b9fba5375687c6a44565d49905796b355ba4be22587" +
	"9b9da1f24c2561c039b6b08c3c2b9a25088811dacf70765214f0303132333435" +
	"363738393a3b1b61d1d20d0aa68e884200a4cbf18bf6a4f700acad3002422b90" +
	"82e12217255408e58c19c7f8a18bc57d4a57a0481a653a9a5f2c5abffc086826" +
	"b5b37565aa875c86fd606a05a69f77b10d3612433e1cae5dc3fa2db4c214002a" +
	"69f164b169139e0fbc8959eaa7699929577f0af077a0dc1f7e6942ac21a84381" +
	"bbf1e5065c03b42d234e47e59e44c65d4f5bd30a24d064da48a00d4fa540ff8c" +
	"e8377e9e8d237f91165407dc217ec8e8617767ced409b4f1500c4b2f3c4920bf" +
	"8aab1dce2d5bfd94e3"

func TestVectors(t *testing.T) {
	if *printVectors {
		printDocVectors(t)
	}
	agent := DeriveAgentKey(testMaster, testIdentity)
	ab := agent.Bytes()
	eq := func(what, got, want string) {
		t.Helper()
		if got != want {
			t.Errorf("%s:\n got %s\nwant %s", what, got, want)
		}
	}
	eq("agent key", hex.EncodeToString(ab[:]), vecAgentKey)
	eq("object key", hex.EncodeToString(subkey(ab, infoObjectKey, 32)), vecObjectKey)
	eq("key id", agent.ID(), vecKeyID)

	keys, st, res := vectorSnapshot(t)
	pol, err := keys.Polynomial()
	if err != nil || uint64(pol) != vecPoly {
		t.Errorf("polynomial %#x (%v), want %#x", uint64(pol), err, vecPoly)
	}
	if len(res.Trees) != len(vecTrees) {
		t.Errorf("%d trees, want %d", len(res.Trees), len(vecTrees))
	}
	for id, want := range vecTrees {
		tr := res.Trees[mustID(t, id)]
		if tr == nil {
			t.Errorf("tree %s missing", id)
			continue
		}
		b, err := tr.Encode()
		if err != nil {
			t.Fatal(err)
		}
		eq("tree "+id, hex.EncodeToString(b), want)
		eq("tree id", ID(sha256.Sum256(b)).String(), id)
	}
	eq("root", res.Commit.Root.String(), vecRootID)
	eq("bundle hash", res.Commit.BundleHash.String(), vecBundle)
	enc, err := res.Commit.Encode()
	if err != nil {
		t.Fatal(err)
	}
	eq("commit", string(enc), vecCommit)
	eq("commit id", res.CommitID.String(), vecCommitID)

	blob := st.blob(t, res.Head.BlobID)
	eq("pack", hex.EncodeToString(blob), vecPack)
	s := sha256.Sum256(blob)
	eq("pack sha256", hex.EncodeToString(s[:]), vecPackSHA)
	eq("header", hex.EncodeToString(blob[:HeaderSize]), vecHeader)
	h, ix, err := keys.OpenIndex(blob[:HeaderSize], blob[HeaderSize:HeaderSize+res.Head.IndexLength])
	if err != nil {
		t.Fatal(err)
	}
	if !h.Head || h.IndexLength != 687 || h.DataLength != 527 || hex.EncodeToString(h.KeyID[:]) != vecKeyID {
		t.Errorf("header %+v", h)
	}
	eq("index plaintext", hex.EncodeToString(ix.Encode()), vecIndex)
	sys := ix.Entries[1]
	off := h.DataOffset() + sys.Offset
	eq("system.md chunk", hex.EncodeToString(blob[off:off+sys.Length]), vecSystemChunk)
	plain, err := keys.Open(TypeChunk, sys.ID, blob[off:off+sys.Length])
	if err != nil || string(plain) != "You are a test agent.\n" {
		t.Errorf("open system.md chunk: %q, %v", plain, err)
	}

	// The document states the same values.
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "format-v3.md"))
	if err != nil {
		t.Fatal(err)
	}
	flat := strings.Join(strings.Fields(string(doc)), "")
	for _, v := range []string{vecAgentKey, vecObjectKey, vecKeyID, "0x2255c2e83935b7", vecBundle, vecCommitID, vecPackSHA,
		vecIndex, vecPack, vecSystemChunk, vecCommit, strings.ReplaceAll("48524d5303010000 561b1e386fb6b3e1 000002af 000000000000020f", " ", "")} {
		if !strings.Contains(flat, strings.Join(strings.Fields(v), "")) {
			t.Errorf("docs/format-v3.md does not state %.40s...", v)
		}
	}
	for id, tree := range vecTrees {
		if !strings.Contains(flat, tree+id) {
			t.Errorf("docs/format-v3.md does not state tree %s", id)
		}
	}
}

func mustID(t testing.TB, s string) ID {
	id, err := ParseID(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestVectorsRevision1 restores the revision 1 fixture: trees without
// times, special bits or links, a commit without the root's mode. Every
// older snapshot must still restore, with its recorded permission bits
// and the restore's own times.
func TestVectorsRevision1(t *testing.T) {
	for id, hx := range vecTrees1 {
		b, err := hex.DecodeString(hx)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := DecodeTree(b)
		if err != nil {
			t.Fatalf("tree %s: %v", id, err)
		}
		for _, e := range tr.Entries {
			if !e.Untimed || e.Mtime != 0 || e.Mode&^0o777 != 0 || e.Link != "" {
				t.Errorf("tree %s: %q decodes as %+v", id, e.Name, e)
			}
		}
		again, err := tr.Encode()
		if err != nil || hex.EncodeToString(again) != hx {
			t.Errorf("tree %s re-encodes as %x (%v)", id, again, err)
		}
	}
	c, err := DecodeCommit([]byte(vecCommit1))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := c.RootMeta(); ok {
		t.Error("a revision 1 commit has root metadata")
	}
	if enc, err := c.Encode(); err != nil || string(enc) != vecCommit1 {
		t.Errorf("commit re-encodes as %s (%v)", enc, err)
	}

	pack, err := hex.DecodeString(vecPack1)
	if err != nil {
		t.Fatal(err)
	}
	st := newDirStore(t)
	st.put(t, "rev1head", pack)
	r, err := Open(context.Background(), st, testKeys(t, testIdentity), "rev1head", ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now().Add(-time.Minute)
	dir := filepath.Join(t.TempDir(), "out")
	res, err := r.Restore(context.Background(), dir, RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.BundleHash.String() != vecBundle1 || res.Files != 2 || res.Links != 0 || len(res.Stripped) != 0 {
		t.Errorf("restored %+v", res)
	}
	for p, want := range map[string]os.FileMode{"system.md": 0o644, "skills/reentrancy.md": 0o600, "skills": 0o755 | os.ModeDir, "notes": 0o700 | os.ModeDir} {
		fi, err := os.Lstat(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode(), want)
		}
		if fi.ModTime().Before(before) {
			t.Errorf("%s: mtime %v; a revision 1 tree records none, so the restore's time is kept", p, fi.ModTime())
		}
	}

	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "format-v3.md"))
	if err != nil {
		t.Fatal(err)
	}
	flat := strings.Join(strings.Fields(string(doc)), "")
	for _, v := range []string{vecCommitID1, vecPackSHA1, vecPack1, vecCommit1} {
		if !strings.Contains(flat, strings.Join(strings.Fields(v), "")) {
			t.Errorf("docs/format-v3.md does not state %.40s...", v)
		}
	}
	for id, tree := range vecTrees1 {
		if !strings.Contains(flat, tree+id) {
			t.Errorf("docs/format-v3.md does not state tree %s", id)
		}
	}
}

// vecMetaTree exercises what revision 2 adds: a setuid file, a setgid and
// sticky directory, a hard link, times.
func vecMetaTree() *Tree {
	abc := sha256.Sum256([]byte("abc"))
	return &Tree{Entries: []Entry{
		{Name: "a", Type: EntryFile, Mode: 0o755 | os.ModeSetuid, Mtime: 1700000005_000000001, Size: 3, SHA256: abc, Chunks: []ID{abc}},
		{Name: "b", Type: EntryDir, Mode: 0o775 | os.ModeSetgid | os.ModeSticky, Mtime: -1, SHA256: mustID(nil, vecNotesID)},
		{Name: "c", Type: EntryFile, Size: 3, SHA256: abc, Link: "a"},
	}}
}

const (
	vecMetaTreeHex = "000000030001610309ed17979cff602ff2010000000000000003ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad00000001ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad0001620407fdffffffffffffffffdf3f619804a92fdb4057192dc43dd748ea778adc52bc498ce80524c014b811190001630500000000000000000003ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad000161"
	vecMetaTreeID  = "0c72a0aba205594495b2cd7373d19600c103058197de23250757102c90e9353d"
)

func TestTreeVectorMeta(t *testing.T) {
	tr := vecMetaTree()
	b, err := tr.Encode()
	if err != nil {
		t.Fatal(err)
	}
	id := ID(sha256.Sum256(b))
	if *printVectors {
		fmt.Printf("meta tree %s\n  %x\n", id, b)
	}
	if hex.EncodeToString(b) != vecMetaTreeHex || id.String() != vecMetaTreeID {
		t.Errorf("meta tree %s\n  %x", id, b)
	}
	back, err := DecodeTree(b)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(back.Entries) != fmt.Sprint(tr.Entries) {
		t.Errorf("decoded %+v\nwant %+v", back.Entries, tr.Entries)
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "format-v3.md"))
	if err != nil {
		t.Fatal(err)
	}
	if flat := strings.Join(strings.Fields(string(doc)), ""); !strings.Contains(flat, vecMetaTreeHex+vecMetaTreeID) {
		t.Error("docs/format-v3.md does not state the revision 2 tree vector")
	}
}

// vecSymlinkTree is §12.3's revision 3 tree: a file, and two symlinks
// (targets verbatim: a sibling, and an absolute path through "..").
func vecSymlinkTree() *Tree {
	return &Tree{Entries: []Entry{
		{Name: "a", Type: EntryFile, Mode: 0o644, Mtime: 1700000005000000001, Size: 3, SHA256: sha256.Sum256([]byte("abc")), Chunks: []ID{sha256.Sum256([]byte("abc"))}},
		{Name: "l", Type: EntrySymlink, Mtime: 1700000006000000000, Link: "a"},
		{Name: "m", Type: EntrySymlink, Mtime: -1, Link: "/abs/../x"},
	}}
}

const (
	vecSymlinkTreeHex = "000000030001610301a417979cff602ff2010000000000000003ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad00000001ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad00016c06000017979cff9bcabc0000016100016d060000ffffffffffffffff00092f6162732f2e2e2f78"
	vecSymlinkTreeID  = "5f0233e6f17333c198cd16a35d8b783f77b7b889c3ad9fb67b4ef10611938417"
)

func TestTreeVectorSymlink(t *testing.T) {
	tr := vecSymlinkTree()
	b, err := tr.Encode()
	if err != nil {
		t.Fatal(err)
	}
	id := ID(sha256.Sum256(b))
	if *printVectors {
		fmt.Printf("symlink tree %s\n  %x\n", id, b)
	}
	if hex.EncodeToString(b) != vecSymlinkTreeHex || id.String() != vecSymlinkTreeID {
		t.Errorf("symlink tree %s\n  %x", id, b)
	}
	back, err := DecodeTree(b)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(back.Entries) != fmt.Sprint(tr.Entries) {
		t.Errorf("decoded %+v\nwant %+v", back.Entries, tr.Entries)
	}
	// Symlinks count toward nothing: the tree's bundle hash is its one
	// file's (docs/design.md §2).
	s, err := Summarize(context.Background(), TreeMap{id: back}, id)
	if err != nil {
		t.Fatal(err)
	}
	want := hash.FromFiles([]hash.File{{Path: "a", Size: 3, SHA256: sha256.Sum256([]byte("abc"))}})
	if s.Files != 1 || s.Bytes != 3 || s.Dirs != 0 || s.BundleHash != want {
		t.Errorf("summary %+v, want 1 file of 3 bytes, %s", s, want)
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "format-v3.md"))
	if err != nil {
		t.Fatal(err)
	}
	if flat := strings.Join(strings.Fields(string(doc)), ""); !strings.Contains(flat, vecSymlinkTreeHex+vecSymlinkTreeID) {
		t.Error("docs/format-v3.md does not state the revision 3 tree vector")
	}
}
