// Package fielderr is ghrunner's one "field and rule" error: an input
// refused before anything changed, naming the field and the rule it broke.
// A control-plane function's payload, a fleet launch request and an
// operator's ghrunner command all refuse with it; Source says which, as the
// message starts. It imports only the standard library, so that any layer
// can use it without taking on another's dependencies.
package fielderr

import (
	"errors"
	"fmt"
)

// Sources: who refused, as the message starts.
const (
	// Payload is a control-plane function refusing its payload.
	Payload = "invalid payload"
	// Fleet is the fleet refusing a launch request before calling EC2.
	Fleet = "fleet"
	// Operator is ghrunner (the CLI) refusing the operator's input: the
	// message is the field and the rule alone.
	Operator = ""
)

// Error is an input refused: Field (may be empty when the whole input is
// at fault) and the Rule it broke, refused by Source.
type Error struct {
	Source string
	Field  string
	Rule   string
}

// Error is "<source>: <field>: <rule>", leaving out an empty source or field.
func (e *Error) Error() string {
	s := e.Rule
	if e.Field != "" {
		s = e.Field + ": " + s
	}
	if e.Source != "" {
		s = e.Source + ": " + s
	}
	return s
}

// New returns an *Error of source naming field, its rule formatted.
func New(source, field, format string, args ...any) error {
	return &Error{Source: source, Field: field, Rule: fmt.Sprintf(format, args...)}
}

// From returns the *Error of source in err's chain, if there is one.
func From(err error, source string) (*Error, bool) {
	var e *Error
	if errors.As(err, &e) && e.Source == source {
		return e, true
	}
	return nil, false
}

// Is says whether err's chain holds an *Error of source.
func Is(err error, source string) bool {
	_, ok := From(err, source)
	return ok
}
