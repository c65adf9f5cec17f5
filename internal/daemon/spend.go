package daemon

import (
	"math/big"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hermesd/hermesd/internal/compose"
	"github.com/hermesd/hermesd/internal/ledger"
)

// spendCollector exports the cost ledger's totals as counters. They are
// read from the ledger at scrape time, so they go on from their persisted
// values after a restart instead of starting again at zero. Series per
// agent: a few, plus two per chain the agent wrote on.
type spendCollector struct {
	l      *ledger.Ledger
	agents []string

	stores, encoded, encodedEpochs, frost, clamped, suiTx, naiveEpochs, chainTx, gas, feeWei *prometheus.Desc
}

func newSpendCollector(l *ledger.Ledger, agents []string) *spendCollector {
	a := []string{"agent"}
	return &spendCollector{
		l: l, agents: agents,
		stores: prometheus.NewDesc("hermesd_walrus_stores_total",
			"Walrus store answers by kind: blob (a new blob of this agent's), patch (a share of a quilt), reused (already certified, nothing paid).",
			[]string{"agent", "kind"}, nil),
		encoded: prometheus.NewDesc("hermesd_walrus_encoded_bytes_total",
			"Encoded bytes of the blobs stored (what Walrus charges for: about 5x the bytes plus ~64 MB per blob).", a, nil),
		encodedEpochs: prometheus.NewDesc("hermesd_walrus_encoded_byte_epochs_total",
			"Encoded bytes times the epochs paid for.", a, nil),
		frost: prometheus.NewDesc("hermesd_walrus_cost_frost_total",
			"Walrus storage cost as the publishers reported it, in FROST (1 WAL = 1e9 FROST).", a, nil),
		clamped: prometheus.NewDesc("hermesd_walrus_answers_clamped_total",
			"Walrus store answers (or shares of a quilt's) that reported more than Walrus's formula allows for the bytes sent; counted at the formula's bound.", a, nil),
		suiTx: prometheus.NewDesc("hermesd_sui_transactions_total",
			"Sui transactions the stores took (2 per new blob; a quilt's shared by its patches).", a, nil),
		naiveEpochs: prometheus.NewDesc("hermesd_naive_encoded_byte_epochs_total",
			"Encoded bytes times epochs the same snapshots would take as one whole-brain blob each (the naive way).", a, nil),
		chainTx: prometheus.NewDesc("hermesd_chain_transactions_total",
			"Pointer transactions mined, by chain id (a multicall of n agents counts 1/n for each).", []string{"agent", "chain_id"}, nil),
		gas: prometheus.NewDesc("hermesd_gas_used_total",
			"Gas used by pointer transactions, by the chain they were mined on (a multicall's gas is split evenly across its agents).",
			[]string{"agent", "chain_id"}, nil),
		feeWei: prometheus.NewDesc("hermesd_gas_fee_wei_total",
			"Gas used times effective gas price of pointer transactions, in wei, by chain id (a multicall's split across its agents).",
			[]string{"agent", "chain_id"}, nil),
	}
}

func (c *spendCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.stores, c.encoded, c.encodedEpochs, c.frost, c.suiTx, c.naiveEpochs, c.chainTx, c.gas, c.feeWei} {
		ch <- d
	}
}

func (c *spendCollector) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	for _, id := range c.agents {
		t := c.l.Total(id)
		counter(c.stores, float64(t.Blobs), id, "blob")
		counter(c.stores, float64(t.Patches), id, "patch")
		counter(c.stores, float64(t.Reused), id, "reused")
		counter(c.encoded, float64(t.EncodedBytes), id)
		counter(c.encodedEpochs, float64(t.EncodedByteEpochs), id)
		counter(c.frost, float64(t.FROST), id)
		counter(c.clamped, float64(t.Clamped), id)
		counter(c.suiTx, t.SuiTx, id)
		counter(c.naiveEpochs, float64(t.Naive.EncodedByteEpochs), id)
		for chain, s := range t.Chains {
			cid := strconv.FormatUint(chain, 10)
			counter(c.chainTx, s.Transactions, id, cid)
			counter(c.gas, float64(s.Gas), id, cid)
			fee := 0.0
			if s.FeeWei != nil {
				fee, _ = new(big.Float).SetInt(s.FeeWei).Float64()
			}
			counter(c.feeWei, fee, id, cid)
		}
	}
}

// CostReport is the cost ledger's account of every agent at the
// configured prices (`hermesd cost`, the cost section of /v1/status).
func (d *Daemon) CostReport() ledger.Report {
	books := make([]ledger.Book, 0, len(d.agents))
	for _, a := range d.agents {
		books = append(books, d.ledger.Book(a.ID()))
	}
	return ledger.NewReport(books, compose.Prices(d.cfg), d.now())
}
