package config

import "fmt"

// Secret is a credential read from a key stored as a Pulumi secret. It prints as "[secret]"
// in every format and as JSON, so a Config can be logged whole; Reveal is for the one place
// each layer hands it to a resource, where it is wrapped back into a Pulumi secret
// (pulumi.ToSecret) and so stays encrypted in the state.
//
// The config package holds no Pulumi types, so the operator CLI and the tests that only
// parse configuration do not link the Pulumi SDK.
//
// The value sits behind a pointer: where fmt prints a struct without calling its methods
// (a wrong verb, such as %s on a Config), it shows a pointer's address, never its target.
type Secret struct{ value *string }

func newSecret(v string) *Secret { return &Secret{value: &v} }

const redacted = "[secret]"

// Reveal returns the credential itself. Call it only to build a resource input, inside
// pulumi.ToSecret.
func (s Secret) Reveal() string {
	if s.value == nil {
		return ""
	}
	return *s.value
}

func (Secret) String() string               { return redacted }
func (Secret) GoString() string             { return redacted }
func (Secret) Format(f fmt.State, _ rune)   { _, _ = f.Write([]byte(redacted)) }
func (Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }
func (Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }
