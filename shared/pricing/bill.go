package pricing

import (
	"fmt"
	"math"
)

// Measured is what Loam's own counters say one unit of work costs in requests. `loam cost`
// measures it on an in-process cluster; the figures scale with time (flushes are per
// interval until the buffer fills) or with bytes (segments per GiB).
type Measured struct {
	FlushInterval  float64 // seconds between a log node's WAL flushes while it has data
	MaxBufferBytes float64 // a flush happens early when this much is buffered

	PutsPerFlush    float64 // S3 PUTs per flush (the WAL object)
	CommitsPerFlush float64 // CommitWal calls per flush (Raft entries; batched ones count once)
	CommitBytes     float64 // bytes of one CommitWal request on the wire

	SegmenterGetsPerWAL       float64 // S3 GETs the segmenter makes per WAL object
	SegmentPutsPerGiB         float64 // segment PUTs per GiB ingested at SegmentTargetBytes
	SegmentTargetBytes        float64
	CoordWritesPerWAL         float64 // coordination-table writes per WAL object (functions)
	CoordReadsPerWAL          float64
	RegistryWritesPerNodeHour float64 // node registry heartbeats
}

// Deployment is the shape billed: the Terraform module's defaults.
type Deployment struct {
	Zones               int
	NodeBytesPerSecond  float64 // per-task produce rate autoscaling holds (lognode_produce_bytes_target)
	MinNodesPerZone     int
	NodeVCPU, NodeGB    float64
	Voters              int
	VoterHourly         float64
	VoterVolumeGB       float64
	RetentionDays       float64
	ReadFanout          float64 // consumers reading each byte once
	LambdaBatch         float64 // WAL notifications per segmenter invocation
	LambdaSecondsPerWAL float64
	LambdaMemoryGB      float64
}

// DefaultDeployment is terraform/examples/complete: three zones, arm64 Fargate tasks of 1
// vCPU and 2 GiB scaled at 32 MiB/s each, three m7g.large voters with 50 GB gp3, 7 days of
// retention, one consumer group, a segmenter batch of 10 at 2 GiB.
var DefaultDeployment = Deployment{
	Zones: 3, NodeBytesPerSecond: 32 << 20, MinNodesPerZone: 1, NodeVCPU: 1, NodeGB: 2,
	Voters: 3, VoterHourly: EC2M7gLargePerHour, VoterVolumeGB: 50, RetentionDays: 7, ReadFanout: 1,
	LambdaBatch: 10, LambdaSecondsPerWAL: 0.05, LambdaMemoryGB: 2,
}

// Line is one row of a bill: monthly dollars and how they were reached.
type Line struct {
	Item    string
	Monthly float64
	Basis   string
}

// Nodes is how many log node tasks the deployment runs at bytesPerSecond: enough for the
// per-task target, at least the floor per zone, spread evenly over the zones.
func (d Deployment) Nodes(bytesPerSecond float64) int {
	n := int(math.Ceil(bytesPerSecond / d.NodeBytesPerSecond))
	perZone := max(d.MinNodesPerZone, (n+d.Zones-1)/d.Zones)
	return perZone * d.Zones
}

// FlushesPerSecond is one log node's WAL flushes at rate r (bytes/s): one per interval, or
// more when the buffer fills first.
func (m Measured) FlushesPerSecond(r float64) float64 {
	if r <= 0 {
		return 0
	}
	return max(1/m.FlushInterval, r/m.MaxBufferBytes)
}

// WALClass is where a durability class keeps its WAL objects, and how often it flushes.
type WALClass struct {
	Name          string
	FlushInterval float64 // seconds
	Copies        float64 // buckets each WAL object is PUT to
	Store         Class   // their prices
	// Lifetime is how long a WAL object is stored before GC deletes it (segmenting within
	// the segment max age, then the GC grace), in seconds.
	Lifetime float64
}

// The classes: standard (250 ms flush, one S3 Standard bucket) and express (5 ms flush,
// three S3 Express One Zone directory buckets, two of three acknowledge). Both keep their
// segments on S3 Standard.
var (
	StandardClass = WALClass{Name: "standard", FlushInterval: 0.25, Copies: 1, Store: S3Standard, Lifetime: 20 * 60}
	ExpressClass  = WALClass{Name: "express", FlushInterval: 0.005, Copies: 3, Store: S3Express, Lifetime: 20 * 60}
)

// LoamBill is the monthly bill of d on the standard class at bytesPerSecond of produce.
func LoamBill(m Measured, d Deployment, bytesPerSecond float64) []Line {
	return ClassBill(m, d, StandardClass, bytesPerSecond)
}

// ClassBill is the monthly bill of d with every stream in class c at bytesPerSecond.
func ClassBill(m Measured, d Deployment, c WALClass, bytesPerSecond float64) []Line {
	m.FlushInterval = c.FlushInterval
	nodes := d.Nodes(bytesPerSecond)
	perNode := bytesPerSecond / float64(nodes)
	flushes := m.FlushesPerSecond(perNode) * float64(nodes) // WAL objects per second
	walPuts := flushes * m.PutsPerFlush * c.Copies * SecondsPerMonth
	walBytes := bytesPerSecond * SecondsPerMonth // bytes PUT to each copy
	walStoredGB := bytesPerSecond * c.Lifetime * c.Copies / bytesPerGB
	objectBytes := perNode / m.FlushesPerSecond(perNode)
	// S3 Express charges upload and retrieval per GB above 512 KiB of each request.
	feeShare := 0.0
	if objectBytes > 512<<10 {
		feeShare = (objectBytes - 512<<10) / objectBytes
	}
	gib := bytesPerSecond * SecondsPerMonth / bytesPerGB
	segPuts := gib * m.SegmentPutsPerGiB
	gets := flushes * m.SegmenterGetsPerWAL * SecondsPerMonth
	storedGB := bytesPerSecond * d.RetentionDays * 86400 / bytesPerGB
	invocations := flushes * SecondsPerMonth / d.LambdaBatch
	gbSeconds := flushes * SecondsPerMonth * d.LambdaSecondsPerWAL * d.LambdaMemoryGB
	// SQS: S3 sends each notification; the mapping receives and deletes in batches.
	sqsRequests := flushes*SecondsPerMonth + 2*invocations
	coordWrites := flushes*SecondsPerMonth*m.CoordWritesPerWAL + float64(nodes)*m.RegistryWritesPerNodeHour*HoursPerMonth
	coordReads := flushes * SecondsPerMonth * m.CoordReadsPerWAL
	// Commits cross zones twice (log node to leader 2/3 of the time, leader to two followers).
	commitGB := flushes * m.CommitsPerFlush * m.CommitBytes * (2.0/3 + 2) * SecondsPerMonth / bytesPerGB
	nlbGBPerHour := bytesPerSecond * (1 + d.ReadFanout) * 3600 / bytesPerGB
	walLine := Line{"S3 PUT (WAL objects)", walPuts / 1000 * c.Store.PutPer1000,
		fmt.Sprintf("%.0f nodes × %.1f flushes/s × %.0f %s", float64(nodes), m.FlushesPerSecond(perNode), c.Copies, c.Store.Name)}
	walLine.Monthly += walBytes * c.Copies * feeShare / bytesPerGB * c.Store.UploadPerGB
	getLine := Line{"S3 GET (segmenter)", gets / 1000 * c.Store.GetPer1000, fmt.Sprintf("%.1f per WAL object", m.SegmenterGetsPerWAL)}
	getLine.Monthly += walBytes * feeShare / bytesPerGB * c.Store.RetrievalPerGB
	return []Line{
		walLine,
		{"S3 PUT (segments)", segPuts / 1000 * S3StandardPutPer1000, fmt.Sprintf("%.1f per GiB at a %.0f MiB target", m.SegmentPutsPerGiB, m.SegmentTargetBytes/(1<<20))},
		getLine,
		{"S3 storage", storedGB*S3StandardStoragePerGBMonth + walStoredGB*c.Store.StoragePerGBMonth,
			fmt.Sprintf("%.0f GB of segments (%.0f days) + %.1f GB of WAL (%s)", storedGB, d.RetentionDays, walStoredGB, c.Store.Name)},
		{"Lambda", invocations/1e6*LambdaRequestsPerMillion + gbSeconds*LambdaArmPerGBSecond, fmt.Sprintf("%.1fM invocations, %.0f GB-s", invocations/1e6, gbSeconds)},
		{"SQS", sqsRequests / 1e6 * SQSRequestsPerMillion, fmt.Sprintf("%.1fM requests", sqsRequests/1e6)},
		{"DynamoDB", coordWrites/1e6*DynamoDBWritePerMillion + coordReads/1e6*DynamoDBReadPerMillion, fmt.Sprintf("%.1fM writes, %.1fM reads", coordWrites/1e6, coordReads/1e6)},
		{"Fargate (log nodes)", float64(nodes) * (d.NodeVCPU*FargateArmPerVCPUHour + d.NodeGB*FargateArmPerGBHour) * HoursPerMonth, fmt.Sprintf("%d tasks of %.0f vCPU, %.0f GB", nodes, d.NodeVCPU, d.NodeGB)},
		{"EC2 + EBS (sequencer)", float64(d.Voters) * (d.VoterHourly*HoursPerMonth + d.VoterVolumeGB*EBSGp3PerGBMonth), fmt.Sprintf("%d voters", d.Voters)},
		{"NLB", NLBPerHour*HoursPerMonth + math.Max(1, nlbGBPerHour)*NLBPerNLCUHour*HoursPerMonth, fmt.Sprintf("%.0f GB/h processed", nlbGBPerHour)},
		{"cross-zone transfer", commitGB * 2 * CrossAZPerGB, "commits only: produce and fetch stay in the client's zone"},
	}
}

// KafkaBill is the same workload on three Kafka brokers (one per zone, RF 3, acks=all,
// clients in every zone without fetch-from-follower): brokers sized for the rate, gp3
// volumes holding three copies with 30 % headroom, and the cross-zone bytes of leaders
// reached from other zones and of replication.
func KafkaBill(d Deployment, bytesPerSecond float64) []Line {
	hourly, size := EC2M7gLargePerHour, "m7g.large"
	switch {
	case bytesPerSecond > 50<<20:
		hourly, size = EC2M7g2XLargePerHour, "m7g.2xlarge"
	case bytesPerSecond > 10<<20:
		hourly, size = EC2M7gXLargePerHour, "m7g.xlarge"
	}
	storedGB := bytesPerSecond * d.RetentionDays * 86400 / bytesPerGB * 3 * 1.3
	monthGB := bytesPerSecond * SecondsPerMonth / bytesPerGB
	// 2/3 of produce and of each consumer's fetches cross a zone; replication sends every
	// byte to two other zones. Each crossing is billed out and in.
	crossGB := monthGB * (2.0/3 + 2.0/3*d.ReadFanout + 2)
	return []Line{
		{"EC2 (brokers)", 3 * hourly * HoursPerMonth, "3 × " + size},
		{"EBS gp3", storedGB * EBSGp3PerGBMonth, fmt.Sprintf("%.0f GB: 3 copies + 30 %%", storedGB)},
		{"cross-zone transfer", crossGB * 2 * CrossAZPerGB, fmt.Sprintf("%.0f GB cross zones", crossGB)},
	}
}

// Total sums a bill.
func Total(lines []Line) float64 {
	t := 0.0
	for _, l := range lines {
		t += l.Monthly
	}
	return t
}
