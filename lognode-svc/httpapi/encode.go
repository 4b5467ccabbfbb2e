package httpapi

import (
	"encoding/base64"
	"strconv"

	"github.com/loamhq/loam/shared/jsonenc"
	"github.com/loamhq/loam/shared/streamapi"
)

func appendInt(dst []byte, v int64) []byte { return strconv.AppendInt(dst, v, 10) }

func appendBase64(dst []byte, b []byte) []byte {
	n := base64.StdEncoding.EncodedLen(len(b))
	dst = append(dst, make([]byte, n)...)
	base64.StdEncoding.Encode(dst[len(dst)-n:], b)
	return dst
}

// appendString appends s as a JSON string (jsonenc.AppendString).
func appendString(dst []byte, s string) []byte { return jsonenc.AppendString(dst, s) }

// KeyPartition is Kafka's default partitioner (streamapi.KeyPartition: the Go client
// places keyed records with the same function, so the two cannot disagree).
func KeyPartition(key []byte, partitions int32) int32 {
	return streamapi.KeyPartition(key, partitions)
}
