package daemon

import (
	"bufio"
	"encoding/json"
	"io"

	"github.com/hermesd/hermesd/internal/compose"
	"github.com/hermesd/hermesd/internal/ledger"
)

// writeStatus writes Status() as JSON one agent at a time. A thousand
// agents' status and cost are megabytes of JSON, and encoding the report
// whole held it two or three times over (the report, the encoding, its
// indenting) for every poll: a monitor polling a big daemon set its memory
// peak. Here a request holds one agent's line. TestStatusStreamIsStatus
// keeps the two the same.
func (d *Daemon) writeStatus(w io.Writer) error {
	s := jsonStream{w: bufio.NewWriterSize(w, 16<<10)}
	s.raw("{\n  \"ready\": ")
	s.value(d.Ready(), "  ")
	s.raw(",\n  \"agents\": [")
	for i, a := range d.agents {
		s.elem(i, d.agentStatus(a), "    ")
	}
	s.close(len(d.agents), "  ")
	now := d.now()
	prices := compose.Prices(d.cfg)
	s.raw(",\n  \"cost\": {\n    \"at\": ")
	s.value(now, "    ")
	s.raw(",\n    \"prices\": ")
	s.value(prices, "    ")
	s.raw(",\n    \"agents\": [")
	t := ledger.NewTally(prices, now)
	for i, a := range d.agents {
		s.elem(i, t.Add(d.ledger.Book(a.ID())), "      ")
	}
	s.close(len(d.agents), "    ")
	s.raw(",\n    \"total\": ")
	s.value(t.Total(), "    ")
	s.raw("\n  }\n}\n")
	if s.err != nil {
		return s.err
	}
	return s.w.Flush()
}

// jsonStream writes indented JSON piece by piece; its first error sticks.
type jsonStream struct {
	w   *bufio.Writer
	err error
}

func (s *jsonStream) raw(str string) {
	if s.err == nil {
		_, s.err = s.w.WriteString(str)
	}
}

// value writes v indented as if it stood at prefix.
func (s *jsonStream) value(v any, prefix string) {
	if s.err != nil {
		return
	}
	b, err := json.MarshalIndent(v, prefix, "  ")
	if err != nil {
		s.err = err
		return
	}
	_, s.err = s.w.Write(b)
}

// elem writes the i-th element of an array whose elements stand at prefix.
func (s *jsonStream) elem(i int, v any, prefix string) {
	if i > 0 {
		s.raw(",")
	}
	s.raw("\n" + prefix)
	s.value(v, prefix)
}

// close ends an array of n elements whose closing bracket stands at prefix.
func (s *jsonStream) close(n int, prefix string) {
	if n > 0 {
		s.raw("\n" + prefix)
	}
	s.raw("]")
}
