package gc

// RetiredObject is a stand-in for the sequencer addition of issue 4 (/work/issue4-design.md)
// until shared/meta declares it; it is replaced by meta.RetiredObject when it does.
type RetiredObject struct {
	Key       string
	RetiredMs int64
}
