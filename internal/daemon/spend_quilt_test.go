package daemon

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hermesd/hermesd/internal/compose"
	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/headref"
	"github.com/hermesd/hermesd/internal/ledger"
	"github.com/hermesd/hermesd/internal/localwalrus"
	"github.com/hermesd/hermesd/internal/wait"
	"github.com/hermesd/hermesd/internal/walruscost"
)

// storeAnswer is one store the publisher answered 200, as the test read
// it from the raw exchange: the charge from the answer's own fields, and
// for a quilt the bytes of every part sent and the patch id it got.
type storeAnswer struct {
	round   int
	quilt   bool
	blobID  string
	charge  walruscost.Charge
	patches []string // in the order of the parts
	sizes   []uint64 // the parts' bytes, in the same order
}

// answerRecorder stands between the daemon and the devnet's publisher and
// records every store answer that passes.
type answerRecorder struct {
	t     *testing.T
	srv   *httptest.Server
	round atomic.Int32

	mu      sync.Mutex
	answers []storeAnswer
}

type partsKey struct{}

func newAnswerRecorder(t *testing.T, target string) *answerRecorder {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	ar := &answerRecorder{t: t}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			if pr.In.Method != http.MethodPut || pr.In.URL.Path != "/v1/quilts" {
				return
			}
			// The parts' names and sizes, in the order sent.
			body, err := io.ReadAll(io.LimitReader(pr.Out.Body, 64<<20))
			if err != nil {
				t.Errorf("read a quilt body: %v", err)
				return
			}
			pr.Out.Body = io.NopCloser(bytes.NewReader(body))
			pr.Out.ContentLength = int64(len(body))
			_, params, err := mime.ParseMediaType(pr.In.Header.Get("Content-Type"))
			if err != nil {
				t.Errorf("quilt Content-Type: %v", err)
				return
			}
			var names []string
			var sizes []uint64
			mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
			for {
				p, err := mr.NextPart()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Errorf("quilt body: %v", err)
					return
				}
				n, _ := io.Copy(io.Discard, p)
				names, sizes = append(names, p.FormName()), append(sizes, uint64(n))
			}
			pr.Out = pr.Out.WithContext(context.WithValue(pr.Out.Context(), partsKey{}, quiltParts{names, sizes}))
		},
		ModifyResponse: func(resp *http.Response) error {
			if resp.Request.Method != http.MethodPut || resp.StatusCode != http.StatusOK {
				return nil
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				return err
			}
			resp.Body = io.NopCloser(bytes.NewReader(b))
			ar.record(resp.Request, b)
			return nil
		},
	}
	ar.srv = httptest.NewServer(rp)
	t.Cleanup(ar.srv.Close)
	return ar
}

type quiltParts struct {
	names []string
	sizes []uint64
}

// blobStoreJSON is the part of a store answer the charge comes from.
type blobStoreJSON struct {
	NewlyCreated *struct {
		BlobObject struct {
			BlobID  string `json:"blobId"`
			Storage struct {
				StorageSize uint64 `json:"storageSize"`
			} `json:"storage"`
		} `json:"blobObject"`
		ResourceOperation struct {
			RegisterFromScratch *struct {
				EncodedLength uint64 `json:"encodedLength"`
				EpochsAhead   uint64 `json:"epochsAhead"`
			} `json:"registerFromScratch"`
		} `json:"resourceOperation"`
		Cost uint64 `json:"cost"`
	} `json:"newlyCreated"`
	AlreadyCertified *struct {
		BlobID string `json:"blobId"`
	} `json:"alreadyCertified"`
}

// record reads one store answer's charge.
func (ar *answerRecorder) record(req *http.Request, body []byte) {
	t := ar.t
	a := storeAnswer{round: int(ar.round.Load())}
	var bs blobStoreJSON
	if req.URL.Path == "/v1/quilts" {
		var q struct {
			BlobStoreResult  blobStoreJSON `json:"blobStoreResult"`
			StoredQuiltBlobs []struct {
				Identifier   string `json:"identifier"`
				QuiltPatchID string `json:"quiltPatchId"`
			} `json:"storedQuiltBlobs"`
		}
		if err := json.Unmarshal(body, &q); err != nil {
			t.Errorf("quilt answer: %v", err)
			return
		}
		bs, a.quilt = q.BlobStoreResult, true
		parts, ok := req.Context().Value(partsKey{}).(quiltParts)
		if !ok {
			t.Errorf("a quilt answer without its request's parts")
			return
		}
		byName := map[string]string{}
		for _, p := range q.StoredQuiltBlobs {
			byName[p.Identifier] = p.QuiltPatchID
		}
		for i, name := range parts.names {
			a.patches = append(a.patches, byName[name])
			a.sizes = append(a.sizes, parts.sizes[i])
		}
	} else if err := json.Unmarshal(body, &bs); err != nil {
		t.Errorf("blob answer: %v", err)
		return
	}
	switch {
	case bs.NewlyCreated != nil:
		nc := bs.NewlyCreated
		rs := nc.ResourceOperation.RegisterFromScratch
		if rs == nil || rs.EncodedLength != nc.BlobObject.Storage.StorageSize {
			t.Errorf("answer %s: no registerFromScratch of the storage's size", body)
			return
		}
		a.blobID = nc.BlobObject.BlobID
		a.charge = walruscost.NewBlob(rs.EncodedLength, rs.EpochsAhead, nc.Cost)
	case bs.AlreadyCertified != nil:
		a.blobID = bs.AlreadyCertified.BlobID // nothing paid
	default:
		t.Errorf("store answer %s", body)
		return
	}
	ar.mu.Lock()
	ar.answers = append(ar.answers, a)
	ar.mu.Unlock()
}

// TestSpendAccountedQuilts: agents whose packs share quilts are charged,
// each in its own ledger, exactly its share of every quilt its packs were
// stored in (by their bytes), the Sui transactions likewise, and its own
// blobs once each; a quilt whose patch was then discarded (the read-back
// failed) is still paid by the agent it held. The ledgers add up exactly
// to what the local Walrus server answered.
func TestSpendAccountedQuilts(t *testing.T) {
	t.Parallel()
	agents := quiltAgentsOf(3)
	w := newWorld(t, agents...)
	for i, a := range agents {
		seedBrain(t, w.brain(a.ID))
		// Packs of different sizes: the shares differ.
		writeFile(t, filepath.Join(w.brain(a.ID), "skills/own.md"), strings.Repeat(a.ID+" knows ", 500+1500*i), 0o644)
	}
	// q2 also holds a file too large for a patch: its pack is a blob.
	big := make([]byte, 1536<<10)
	rand.Read(big)
	writeFile(t, filepath.Join(w.brain("q2"), "memory.db"), string(big), 0o644)
	rec := newAnswerRecorder(t, w.dn.Walrus.URL())
	d := w.startBatching(func(c *config.Config) {
		c.Walrus.Publishers = []string{rec.srv.URL}
		c.Walrus.MaxBlobSize = 4 << 20 // patches up to 1 MiB
		c.Walrus.RetryMax = 1
	})

	// Round 1: every agent's first snapshot; q0's and q1's heads share a
	// quilt (q2's head may share it too, or be its blob).
	rec.round.Store(1)
	flushWhen(t, d, 2)
	settleAll(t, d)

	// Round 2: every agent edits; three heads in one quilt.
	rec.round.Store(2)
	for i, a := range agents {
		writeFile(t, filepath.Join(w.brain(a.ID), "patterns/round2.md"), strings.Repeat("x", 100+4000*i), 0o644)
	}
	flushWhen(t, d, len(agents))
	settleAll(t, d)

	// Round 3: q0's quilt is stored, but its patch does not read back: the
	// snapshot fails and is retaken once the aggregator answers again.
	rec.round.Store(3)
	writeFile(t, filepath.Join(w.brain("q0"), "patterns/round3.md"), "discarded once\n", 0o644)
	wait.For(t, "q0's pack to wait", func() bool { return d.svc.Quilts.Pending() == 1 })
	w.dn.Walrus.SetFaults(localwalrus.Faults{Rate: 1, Target: localwalrus.RouteAggregator,
		Kinds: []localwalrus.Fault{{Kind: localwalrus.FaultStatus, Status: http.StatusForbidden}}})
	d.svc.Quilts.Flush()
	q0, _ := d.Agent("q0")
	wait.For(t, "q0's read-back to fail", q0.Failing)
	w.dn.Walrus.SetFaults(localwalrus.Faults{})
	settleAll(t, d)
	stores(t, w) // every answer the daemon saw has passed the recorder

	// Whose is what: every pack an agent's commits name, head to first.
	owner := map[string]string{}
	svc, err := compose.Build(t.Context(), w.dn.Config, nil, compose.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	for _, a := range agents {
		ac, _ := w.dn.Config.Agent(a.ID)
		pipe := svc.Pipeline(ac, t.TempDir(), nil)
		for head := readPointer(t, w, a.ENSName); head != ""; {
			owner[headref.ID(head)] = a.ID
			r, err := pipe.OpenV3(t.Context(), head)
			if err != nil {
				t.Fatalf("%s: open %s: %v", a.ID, head, err)
			}
			for _, p := range r.Commit().Packs {
				owner[headref.ID(p.BlobID)] = a.ID
			}
			head = r.Commit().Parent
		}
	}

	// What each agent owes by the server's answers.
	want := map[string]*ledger.Spend{}
	for _, a := range agents {
		want[a.ID] = &ledger.Spend{}
	}
	var total ledger.Spend
	var quilts, shared, blobs, discarded int
	rec.mu.Lock()
	answers := rec.answers
	rec.mu.Unlock()
	// Every quilt here lays out in the smallest quilt blob (445,556
	// bytes: 66,034,000 encoded, 63 units) and q2's blob holds 1.5 MiB
	// (72,040,000 encoded, 69 units), each paid for 5 epochs at the local
	// server's default price.
	epochs := uint64(w.dn.Config.EpochsOf(&w.dn.Config.Agents[0]))
	quiltCharge := walruscost.NewBlob(66_034_000, epochs, 63*(epochs*100_000+20_000))
	blobCharge := walruscost.NewBlob(72_040_000, epochs, 69*(epochs*100_000+20_000))
	for _, ans := range answers {
		if ans.quilt && ans.charge != quiltCharge || !ans.quilt && ans.charge != blobCharge {
			t.Errorf("round %d: a store (quilt %v) answered %+v", ans.round, ans.quilt, ans.charge)
		}
		if !ans.quilt {
			id := owner[ans.blobID]
			if id == "" {
				t.Errorf("round %d: blob %s is no agent's", ans.round, ans.blobID)
				continue
			}
			blobs++
			s := ledger.Store(ans.charge)
			want[id].Add(s)
			total.Add(s)
			continue
		}
		quilts++
		if len(ans.patches) > 1 {
			shared++
		}
		for i, share := range ans.charge.Split(ans.sizes) {
			id := owner[ans.patches[i]]
			if id == "" {
				// Only q0's quilt in round 3 held a patch that was
				// discarded; it is paid all the same.
				if ans.round != 3 || len(ans.patches) != 1 {
					t.Errorf("round %d: patch %s of a quilt of %d is no agent's", ans.round, ans.patches[i], len(ans.patches))
					continue
				}
				id = "q0"
				discarded++
			}
			s := ledger.Store(share)
			want[id].Add(s)
			total.Add(s)
		}
	}
	if blobs == 0 || shared == 0 || discarded != 1 {
		t.Fatalf("%d blobs, %d quilts (%d shared), %d discarded patches: the test did not run as designed", blobs, quilts, shared, discarded)
	}

	var got ledger.Spend
	for _, a := range agents {
		b := d.ledger.Book(a.ID).Total
		got.Add(b)
		if w := want[a.ID]; !sameStores(b, *w) {
			t.Errorf("%s recorded %s\nthe answers say %s", a.ID, storesOf(b), storesOf(*w))
		}
		t.Logf("%s: %s", a.ID, storesOf(b))
	}
	if !sameStores(got, total) {
		t.Errorf("the ledgers hold %s\nthe server answered %s", storesOf(got), storesOf(total))
	}
	t.Logf("%d stores answered: %d quilts (%d shared by agents) and %d blobs; across the 3 agents %s",
		len(answers), quilts, shared, blobs, storesOf(total))

	t.Run("metrics", func(t *testing.T) {
		m := getMetrics(t, d)
		for _, a := range agents {
			b := d.ledger.Book(a.ID).Total
			for sample, want := range map[string]float64{
				`hermesd_walrus_stores_total{agent="` + a.ID + `",kind="patch"}`: float64(b.Patches),
				`hermesd_walrus_stores_total{agent="` + a.ID + `",kind="blob"}`:  float64(b.Blobs),
				`hermesd_walrus_cost_frost_total{agent="` + a.ID + `"}`:          float64(b.FROST),
				`hermesd_sui_transactions_total{agent="` + a.ID + `"}`:           b.SuiTx,
			} {
				if got := metricValue(t, m, sample); got != want {
					t.Errorf("%s = %v, want %v", sample, got, want)
				}
			}
		}
		checkDashboard(t, m)
	})
}

// sameStores compares the Walrus side of two spends: integer amounts
// exactly, Sui transactions (sums of fractions) to within rounding.
func sameStores(a, b ledger.Spend) bool {
	return a.Blobs == b.Blobs && a.Patches == b.Patches && a.Reused == b.Reused && a.EncodedBytes == b.EncodedBytes &&
		a.EncodedByteEpochs == b.EncodedByteEpochs && a.FROST == b.FROST && math.Abs(a.SuiTx-b.SuiTx) < 1e-9
}

func storesOf(s ledger.Spend) string {
	return fmt.Sprintf("%d blobs, %d patches, %d reused, %d encoded bytes, %d encoded byte-epochs, %d FROST, %.6f Sui transactions",
		s.Blobs, s.Patches, s.Reused, s.EncodedBytes, s.EncodedByteEpochs, s.FROST, s.SuiTx)
}
