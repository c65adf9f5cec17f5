package ensname

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
	"weak"

	"github.com/adraffy/go-ens-normalize/ensip15"
)

// ErrInvalid means a name ENSIP-15 rejects.
var ErrInvalid = errors.New("ens: invalid name")

// Normalize returns the ENSIP-15 normalised form of name ("Agent.ETH" →
// "agent.eth"). A name ENSIP-15 rejects (empty labels, disallowed or
// mixed-script characters, "xn--" labels, underscores not at the start, ...)
// is an error that wraps ErrInvalid and says why, readably (Readable):
// the characters that do not show are the ones a reader must see.
func Normalize(name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("%w: empty name", ErrInvalid)
	}
	if norm, ok := remembered(name); ok {
		return norm, nil
	}
	norm, err := normalizer().Normalize(name)
	if err != nil {
		shown, escaped := Readable(name)
		reason := ensip15Reason(err)
		if escaped {
			reason += " (characters that do not show are written {U+XXXX}, bytes that are not UTF-8 {0xXX})"
		}
		return "", fmt.Errorf("%w \"%s\": %s", ErrInvalid, shown, reason)
	}
	remember(name, norm)
	return norm, nil
}

// ENSIP-15's tables take about 7 MB of heap once built (a few tens of
// ms), as much as a daemon's other live data. A daemon normalises its
// agents' few names at start and then the same names on every publish,
// so the tables are held weakly (the collector may take them; they are
// built again when an unknown name comes) and each valid name's result
// is remembered, up to memoMax names.
const memoMax = 4096

var (
	normMu  sync.Mutex
	normRef weak.Pointer[ensip15.ENSIP15]

	memoMu sync.RWMutex
	memo   = map[string]string{}
)

func normalizer() *ensip15.ENSIP15 {
	normMu.Lock()
	defer normMu.Unlock()
	if n := normRef.Value(); n != nil {
		return n
	}
	n := ensip15.New()
	normRef = weak.Make(n)
	return n
}

func remembered(name string) (string, bool) {
	memoMu.RLock()
	defer memoMu.RUnlock()
	norm, ok := memo[name]
	return norm, ok
}

func remember(name, norm string) {
	memoMu.Lock()
	defer memoMu.Unlock()
	if len(memo) < memoMax {
		memo[name] = norm
	}
}

// Readable is s as it reads, every character that does not show (a
// control or format character such as U+200E LEFT-TO-RIGHT MARK, a space
// other than U+0020, an unassigned code point) written {U+XXXX} and every
// byte that is not UTF-8 {0xXX}; escaped says whether it wrote one. The
// rest, letters of any script included, is left as it is: an ENS name is
// text, and \u escapes would hide the very characters that make it one.
func Readable(s string) (shown string, escaped bool) {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, "{0x%02X}", s[i])
			escaped = true
		case r == ' ' || unicode.IsGraphic(r) && !unicode.IsSpace(r):
			b.WriteString(s[i : i+n])
		default:
			fmt.Fprintf(&b, "{U+%04X}", r)
			escaped = true
		}
		i += n
	}
	return b.String(), escaped
}

// ensip15Code is how ensip15 writes a code point in its messages.
var ensip15Code = regexp.MustCompile(`\{([0-9A-F]{1,6})\}`)

// ensip15Reason is ensip15's error text made readable: without the
// LEFT-TO-RIGHT MARKs it puts after every quoted label (which show as
// nothing, or as a literal \u200e once escaped), its {XXXX} code points
// written {U+XXXX}, and anything else that does not show escaped.
func ensip15Reason(err error) string {
	s := strings.ReplaceAll(err.Error(), "\u200e", "")
	s = ensip15Code.ReplaceAllStringFunc(s, func(m string) string {
		hex := m[1 : len(m)-1]
		return "{U+" + strings.Repeat("0", max(0, 4-len(hex))) + hex + "}"
	})
	s, _ = Readable(s)
	return s
}
