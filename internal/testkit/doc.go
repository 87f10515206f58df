// Package testkit holds what the unit tests and the e2e share: the destroy-order invariants
// of the whole stack, checked on the mocks' graph (make test) and on a real stack's state
// (make e2e).
package testkit
