package walrustest

import (
	"bufio"
	"bytes"
	"embed"
	"fmt"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
)

// The documented answers, one HTTP answer a file (testdata/README.md
// names the source of each).
//
//go:embed testdata/*.http
var fixtures embed.FS

// Answer is one documented answer of the Walrus service: its status, its
// headers and its body.
type Answer struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON reports whether the answer's body is JSON.
func (a Answer) JSON() bool {
	return strings.HasPrefix(a.Header.Get("Content-Type"), "application/json")
}

// LoadAnswer reads the fixture testdata/name: a status line ("HTTP/1.1
// 200 OK"), header lines, a blank line and the body, whose one final
// newline is the file's, not the answer's.
func LoadAnswer(name string) (Answer, error) {
	data, err := fixtures.ReadFile("testdata/" + name)
	if err != nil {
		return Answer{}, err
	}
	return parseAnswer(data)
}

func parseAnswer(data []byte) (Answer, error) {
	r := textproto.NewReader(bufio.NewReader(bytes.NewReader(data)))
	line, err := r.ReadLine()
	if err != nil {
		return Answer{}, err
	}
	proto, rest, _ := strings.Cut(line, " ")
	code, _, _ := strings.Cut(rest, " ")
	status, err := strconv.Atoi(code)
	if proto != "HTTP/1.1" || err != nil || status < 100 || status > 599 {
		return Answer{}, fmt.Errorf("status line %q", line)
	}
	h, err := r.ReadMIMEHeader()
	if err != nil {
		return Answer{}, fmt.Errorf("headers: %w", err)
	}
	_, body, ok := bytes.Cut(data, []byte("\n\n"))
	if !ok {
		return Answer{}, fmt.Errorf("no blank line after the headers")
	}
	return Answer{Status: status, Header: http.Header(h), Body: bytes.TrimSuffix(body, []byte("\n"))}, nil
}

// mustAnswer is LoadAnswer for the suite's own table, whose fixtures a
// test checks all load.
func mustAnswer(name string) Answer {
	a, err := LoadAnswer(name)
	if err != nil {
		panic("walrustest: fixture " + name + ": " + err.Error())
	}
	return a
}
