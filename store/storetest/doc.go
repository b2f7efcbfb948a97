// Package storetest is the conformance suite of store.Store. Every
// implementation runs it from its own tests:
//
//	storetest.Run(t, func(t *testing.T) store.Store { ... })
//
// The factory is called once per case and must return an empty, migrated
// store that the case may initialise with its own shard count; cases run in
// parallel, so stores must not share state. The suite states in tests what
// the store package's doc promises in prose.
package storetest
