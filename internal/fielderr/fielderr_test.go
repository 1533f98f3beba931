package fielderr

import (
	"errors"
	"fmt"
	"testing"
)

// The three sources keep the messages their former types had.
func TestTheMessageIsSourceFieldAndRule(t *testing.T) {
	for _, c := range []struct {
		err  *Error
		want string
	}{
		{&Error{Source: Payload, Field: "pool", Rule: "required"}, "invalid payload: pool: required"},
		{&Error{Source: Payload, Rule: "empty payload; send a JSON object"}, "invalid payload: empty payload; send a JSON object"},
		{&Error{Source: Fleet, Field: "Count", Rule: "must be at least 1, got 0"}, "fleet: Count: must be at least 1, got 0"},
		{&Error{Source: Operator, Field: "run id", Rule: "must not be empty"}, "run id: must not be empty"},
	} {
		if got := c.err.Error(); got != c.want {
			t.Errorf("%#v: %q, want %q", c.err, got, c.want)
		}
	}
}

// Is and From find an error of their source only, however wrapped.
func TestIsTellsTheSourcesApart(t *testing.T) {
	err := fmt.Errorf("launch: %w", New(Fleet, "Count", "must be at least %d", 1))
	if e, ok := From(err, Fleet); !ok || e.Field != "Count" || e.Rule != "must be at least 1" {
		t.Errorf("From(%v, Fleet) = %v, %t", err, e, ok)
	}
	if Is(err, Payload) || Is(err, Operator) || Is(errors.New("fleet: Count: x"), Fleet) {
		t.Error("Is matched another source, or a plain error")
	}
}
