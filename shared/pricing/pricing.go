// Package pricing holds the AWS list prices Loam's cost figures are computed with, as
// constants with the date they were read and their source, and turns request counts into
// dollars. The benchmark suite (tests/bench/suite) uses it for $ per GiB ingested;
// `loam cost` uses the same figures.
//
// # Caveats
//
//   - Prices are us-east-1 on-demand list prices without free tiers, volume tiers past the
//     first, or negotiated discounts. They were written down from the AWS pricing pages
//     named on each constant as we knew them on AsOf, on a machine without internet
//     access: check them against the pages before quoting a bill.
//   - S3 Express One Zone's upload and retrieval fees apply only to the part of each
//     request above 512 KiB; Requests counts them on every byte given to it, which for
//     the 4–8 MiB WAL objects Loam writes is within 13 %.
package pricing

import "fmt"

// AsOf is the date the prices below were read from the AWS pricing pages.
const AsOf = "2025-04-10"

// S3 pricing page: https://aws.amazon.com/s3/pricing/ (us-east-1, "Requests & data
// retrievals" and "Storage" tabs). S3 Express One Zone figures are those after the price
// reduction of 2025-04-10 (AWS News Blog, "Up to 85% price reductions for Amazon S3
// Express One Zone").
const (
	S3StandardPutPer1000        = 0.005  // PUT, COPY, POST, LIST per 1,000 requests
	S3StandardGetPer1000        = 0.0004 // GET, SELECT and all other requests per 1,000
	S3StandardStoragePerGBMonth = 0.023  // first 50 TB per month

	S3ExpressPutPer1000        = 0.00113 // PUT, COPY, POST, LIST per 1,000 requests
	S3ExpressGetPer1000        = 0.00003 // GET and all other requests per 1,000
	S3ExpressUploadPerGB       = 0.0032  // data upload, per GB above 512 KiB per request
	S3ExpressRetrievalPerGB    = 0.0006  // data retrieval, per GB above 512 KiB per request
	S3ExpressStoragePerGBMonth = 0.11
)

// DynamoDB pricing page: https://aws.amazon.com/dynamodb/pricing/on-demand/ (us-east-1,
// after the on-demand price reduction of 2024-11-01).
const (
	DynamoDBWritePerMillion = 0.625 // write request units
	DynamoDBReadPerMillion  = 0.125 // read request units
)

// EC2 data transfer: https://aws.amazon.com/ec2/pricing/on-demand/ ("Data Transfer within
// the same AWS Region"): $0.01/GB in each direction across Availability Zones.
const CrossAZPerGB = 0.01

// GiB in GB (the pricing pages' GB is 2^30 bytes for storage and transfer).
const bytesPerGB = 1 << 30

// Class is one object-store class's request and transfer prices.
type Class struct {
	Name                        string
	PutPer1000, GetPer1000      float64
	UploadPerGB, RetrievalPerGB float64
	StoragePerGBMonth           float64
}

// The classes Loam writes WAL objects and segments to.
var (
	S3Standard = Class{Name: "s3-standard", PutPer1000: S3StandardPutPer1000, GetPer1000: S3StandardGetPer1000,
		StoragePerGBMonth: S3StandardStoragePerGBMonth}
	S3Express = Class{Name: "s3-express", PutPer1000: S3ExpressPutPer1000, GetPer1000: S3ExpressGetPer1000,
		UploadPerGB: S3ExpressUploadPerGB, RetrievalPerGB: S3ExpressRetrievalPerGB, StoragePerGBMonth: S3ExpressStoragePerGBMonth}
)

// ClassNamed returns the class called name ("s3-standard" or "s3-express").
func ClassNamed(name string) (Class, error) {
	for _, c := range []Class{S3Standard, S3Express} {
		if c.Name == name {
			return c, nil
		}
	}
	return Class{}, fmt.Errorf("pricing: class %q: want s3-standard or s3-express", name)
}

// Usage is what a workload did to the object store.
type Usage struct {
	Puts, Gets         float64
	BytesPut, BytesGot float64
}

// Cost is the dollars Usage costs in c: requests plus upload and retrieval fees (storage
// is not included, it depends on retention).
func (c Class) Cost(u Usage) float64 {
	return u.Puts/1000*c.PutPer1000 + u.Gets/1000*c.GetPer1000 +
		u.BytesPut/bytesPerGB*c.UploadPerGB + u.BytesGot/bytesPerGB*c.RetrievalPerGB
}

// PerGiB is the dollars per GiB ingested of a workload that made putsPerGiB PUTs and
// getsPerGiB GETs per GiB ingested, wrote each ingested byte once and read it back
// readsPerByte times (0 when the GETs are not counted as reads of the data).
func (c Class) PerGiB(putsPerGiB, getsPerGiB, readsPerByte float64) float64 {
	return c.Cost(Usage{Puts: putsPerGiB, Gets: getsPerGiB, BytesPut: bytesPerGB, BytesGot: readsPerByte * bytesPerGB})
}
