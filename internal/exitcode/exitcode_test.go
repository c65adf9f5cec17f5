package exitcode

import (
	"errors"
	"fmt"
	"testing"
)

func TestWithAndOf(t *testing.T) {
	base := errors.New("no such blob")
	err := fmt.Errorf("restore: %w", With(4, base))
	if code, ok := Of(err); !ok || code != 4 {
		t.Errorf("Of(wrapped) = %d, %v; want 4, true", code, ok)
	}
	if !errors.Is(err, base) || err.Error() != "restore: no such blob" {
		t.Errorf("the marked error changed: %q, Is = %v", err, errors.Is(err, base))
	}
	if code, ok := Of(With(2, With(3, base))); !ok || code != 2 {
		t.Errorf("Of(With(2, With(3, err))) = %d, %v; want the outermost, 2", code, ok)
	}
	if code, ok := Of(base); ok {
		t.Errorf("Of(unmarked) = %d, true; want false", code)
	}
	if err := With(1, nil); err != nil {
		t.Errorf("With(1, nil) = %v; want nil", err)
	}
}
