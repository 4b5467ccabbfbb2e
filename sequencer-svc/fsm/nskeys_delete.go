package fsm

// dropNamespaceKey deletes namespace ns's key record (deleteNamespace: the namespace is
// gone), so a namespace created again under the name starts without a key, or attaches a
// new one with a new id: the old namespace's ns/<id>/ objects are never its. The id
// counter stays, so ids are never reused.
func (a *applier) dropNamespaceKey(ns string) {
	if b := a.tx.Bucket(bNSKeys); b != nil {
		a.check(b.Delete([]byte(ns)))
	}
}
