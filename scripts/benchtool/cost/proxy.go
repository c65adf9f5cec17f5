package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
)

// answers stands between the daemon and the local Walrus server and adds
// up what the server answered to every store: the bench's check that the
// ledgers hold exactly what the network charged, independently of them.
type answers struct {
	srv *http.Server
	url string

	mu   sync.Mutex
	sum  served // answers the daemon received
	lost served // answers the server sent that never reached the daemon
}

// slot carries one exchange's parsed answer from the proxy's response
// hook to the handler that knows whether the daemon received it.
type slot struct {
	quilt bool
	body  []byte
}

type slotKey struct{}

// failWriter notes a write to the daemon that failed.
type failWriter struct {
	http.ResponseWriter
	failed bool
}

func (w *failWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	if err != nil {
		w.failed = true
	}
	return n, err
}

// served is the sum of store answers.
type served struct {
	Blobs, Quilts, Reused uint64 // newly created blobs and quilts; alreadyCertified
	Encoded, ByteEpochs   uint64
	FROST                 uint64
	Bad                   int // answers that did not parse
}

type storeResult struct {
	NewlyCreated *struct {
		BlobObject struct {
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
	AlreadyCertified json.RawMessage `json:"alreadyCertified"`
}

func startAnswers(target string) (*answers, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	a := &answers{}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(u) },
		ModifyResponse: func(r *http.Response) error {
			quilt := r.Request.URL.Path == "/v1/quilts"
			if r.Request.Method != http.MethodPut || r.StatusCode != http.StatusOK || (!quilt && r.Request.URL.Path != "/v1/blobs") {
				return nil
			}
			body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
			r.Body.Close()
			if err != nil {
				return err
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			if sl, ok := r.Request.Context().Value(slotKey{}).(*slot); ok {
				sl.quilt, sl.body = quilt, body
			}
			return nil
		},
		ErrorLog: log.New(io.Discard, "", 0),
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sl := &slot{}
		fw := &failWriter{ResponseWriter: w}
		rp.ServeHTTP(fw, r.WithContext(context.WithValue(r.Context(), slotKey{}, sl)))
		if sl.body != nil {
			// A daemon stopping mid-store never reads the answer, but
			// the network charged it all the same.
			a.add(sl.body, sl.quilt, fw.failed || r.Context().Err() != nil)
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	a.url = "http://" + ln.Addr().String()
	a.srv = &http.Server{Handler: handler}
	go a.srv.Serve(ln)
	return a, nil
}

func (a *answers) add(body []byte, quilt, lost bool) {
	var res storeResult
	var err error
	if quilt {
		var q struct {
			BlobStoreResult storeResult `json:"blobStoreResult"`
		}
		err = json.Unmarshal(body, &q)
		res = q.BlobStoreResult
	} else {
		err = json.Unmarshal(body, &res)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	sum := &a.sum
	if lost {
		sum = &a.lost
	}
	switch nc := res.NewlyCreated; {
	case err != nil:
		sum.Bad++
	case nc != nil && nc.ResourceOperation.RegisterFromScratch != nil:
		if quilt {
			sum.Quilts++
		} else {
			sum.Blobs++
		}
		sum.Encoded += nc.BlobObject.Storage.StorageSize
		sum.ByteEpochs += nc.BlobObject.Storage.StorageSize * nc.ResourceOperation.RegisterFromScratch.EpochsAhead
		sum.FROST += nc.Cost
	case res.AlreadyCertified != nil:
		sum.Reused++
	default:
		sum.Bad++
	}
}

// total is what the daemon received, and what it did not.
func (a *answers) total() (received, lost served) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sum, a.lost
}

func (a *answers) close() error { return a.srv.Close() }

func (s served) String() string {
	return fmt.Sprintf("%d blobs + %d quilts, %d encoded bytes, %d FROST", s.Blobs, s.Quilts, s.Encoded, s.FROST)
}
