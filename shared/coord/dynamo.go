package coord

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DynamoConfig configures a DynamoDB store. Zero fields fall back to the AWS SDK's defaults
// (environment, shared config files, instance roles).
type DynamoConfig struct {
	Table  string // required
	Region string // default: the SDK's (AWS_REGION, ...), else us-east-1
	// Endpoint is the base URL of a non-AWS server (moto, LocalStack); default:
	// AWS_ENDPOINT_URL_DYNAMODB or AWS_ENDPOINT_URL, else AWS.
	Endpoint string
	// AccessKey and SecretKey are static credentials; empty: the SDK's default chain.
	AccessKey string
	SecretKey string
	// CreateTable creates the table in NewDynamo when it does not exist (string keys pk and
	// sk, on-demand billing), waits until it is active, and enables TTL on expires_at.
	// Production tables come from Terraform with the same shape.
	CreateTable bool
	// HTTPClient sends the requests; default: the SDK's.
	HTTPClient aws.HTTPClient
}

// DynamoDB attribute names of the item layout (doc.go).
const (
	dynPK      = "pk"
	dynSK      = "sk"
	dynVersion = "ver"
	dynExpires = "expires_at" // the table's TTL attribute, epoch seconds
	dynAttr    = "a_"         // prefix of attribute Attrs[name]
	dynCounter = "c_"         // prefix of counter Counters[name]
)

// addAttempts bounds Add's retries when its condition keeps failing because the item is
// being changed or has expired.
const addAttempts = 16

// Dynamo is a Store on a DynamoDB table: the serverless side's coordination store.
//
// Every Store call is one request in the common case (GetItem and Query strongly
// consistent; PutItem, DeleteItem, UpdateItem with condition expressions). Expiry is
// checked in each condition and on each read against Now, so items TTL has not yet
// removed (DynamoDB removes them within days; moto never) stay invisible.
type Dynamo struct {
	client *dynamodb.Client
	table  string
	now    func() time.Time
	closed atomic.Bool
}

var _ Store = (*Dynamo)(nil)

// NewDynamo returns a store on the table cfg names. It sends no request unless
// cfg.CreateTable is set.
func NewDynamo(ctx context.Context, cfg DynamoConfig, opts ...Option) (*Dynamo, error) {
	if cfg.Table == "" {
		return nil, fmt.Errorf("coord: new dynamo: empty table name: %w", ErrInvalid)
	}
	o := applyOptions(opts)
	var lo []func(*config.LoadOptions) error
	if cfg.Region != "" {
		lo = append(lo, config.WithRegion(cfg.Region))
	}
	if cfg.AccessKey != "" || cfg.SecretKey != "" {
		lo = append(lo, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(cfg.AccessKey, cfg.SecretKey, "")))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, lo...)
	if err != nil {
		return nil, fmt.Errorf("coord: new dynamo %s: %w", cfg.Table, err)
	}
	if awsCfg.Region == "" {
		awsCfg.Region = "us-east-1"
	}
	client := dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		if cfg.HTTPClient != nil {
			o.HTTPClient = cfg.HTTPClient
		}
	})
	d := &Dynamo{client: client, table: cfg.Table, now: o.now}
	if cfg.CreateTable {
		if err := d.createTable(ctx); err != nil {
			return nil, err
		}
	}
	return d, nil
}

func (d *Dynamo) createTable(ctx context.Context) error {
	_, err := d.client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(d.table),
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(dynPK), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(dynSK), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(dynPK), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(dynSK), KeyType: types.KeyTypeRange},
		},
		BillingMode: types.BillingModePayPerRequest,
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("coord: create table %s: %w", d.table, err)
	}
	w := dynamodb.NewTableExistsWaiter(d.client, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = time.Second, 5*time.Second
	})
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(d.table)}, 5*time.Minute); err != nil {
		return fmt.Errorf("coord: create table %s: wait until active: %w", d.table, err)
	}
	ttl, err := d.client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(d.table)})
	if err != nil {
		return fmt.Errorf("coord: create table %s: describe ttl: %w", d.table, err)
	}
	if desc := ttl.TimeToLiveDescription; desc != nil {
		switch desc.TimeToLiveStatus {
		case types.TimeToLiveStatusEnabled, types.TimeToLiveStatusEnabling:
			if a := aws.ToString(desc.AttributeName); a != dynExpires {
				return fmt.Errorf("coord: create table %s: ttl is on attribute %q, want %q: %w", d.table, a, dynExpires, ErrInvalid)
			}
			return nil
		}
	}
	_, err = d.client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String(d.table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String(dynExpires),
			Enabled:       aws.Bool(true),
		},
	})
	if err != nil {
		return fmt.Errorf("coord: create table %s: enable ttl: %w", d.table, err)
	}
	return nil
}

// Table is the table's name.
func (d *Dynamo) Table() string { return d.table }

// Client is the DynamoDB client the store uses (tests, tools).
func (d *Dynamo) Client() *dynamodb.Client { return d.client }

// Now is the store's clock.
func (d *Dynamo) Now() time.Time { return d.now() }

// Close marks the store closed; the SDK client holds nothing to release.
func (d *Dynamo) Close() error {
	d.closed.Store(true)
	return nil
}

func (d *Dynamo) begin(ctx context.Context) error {
	if d.closed.Load() {
		return ErrClosed
	}
	return ctx.Err()
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }
func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func (d *Dynamo) key(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{dynPK: str(pk), dynSK: str(sk)}
}

// Condition expressions. Names: #pk, #ver, #exp; values: :now (epoch seconds, rounded
// down: an integer expiry e is past at now exactly when e <= floor(now)), :ver.
const (
	condLive    = "(attribute_not_exists(#exp) OR #exp > :now)"
	condAbsent  = "(attribute_not_exists(#pk) OR #exp <= :now)"
	condVersion = "#ver = :ver AND " + condLive
)

// condExpr returns the condition expression of c with its names and values, or "" for the
// zero Condition.
func condExpr(c Condition, now time.Time) (string, map[string]string, map[string]types.AttributeValue) {
	switch {
	case c.Absent:
		return condAbsent,
			map[string]string{"#pk": dynPK, "#exp": dynExpires},
			map[string]types.AttributeValue{":now": num(now.Unix())}
	case c.Version != 0:
		return condVersion,
			map[string]string{"#ver": dynVersion, "#exp": dynExpires},
			map[string]types.AttributeValue{":now": num(now.Unix()), ":ver": num(c.Version)}
	}
	return "", nil, nil
}

// encodeItem is the DynamoDB form of it with expiry exp (epoch seconds, 0: never).
func encodeItem(it Item, exp int64) map[string]types.AttributeValue {
	av := make(map[string]types.AttributeValue, 4+len(it.Attrs)+len(it.Counters))
	av[dynPK], av[dynSK], av[dynVersion] = str(it.PK), str(it.SK), num(it.Version)
	if exp != 0 {
		av[dynExpires] = num(exp)
	}
	for k, v := range it.Attrs {
		av[dynAttr+k] = str(v)
	}
	for k, v := range it.Counters {
		av[dynCounter+k] = num(v)
	}
	return av
}

// decodeDynamo decodes a DynamoDB item; it returns the item and its expiry (epoch
// seconds, 0: never). Attributes outside the layout are ignored.
func decodeDynamo(av map[string]types.AttributeValue) (Item, int64, error) {
	var it Item
	var exp int64
	pk, ok1 := av[dynPK].(*types.AttributeValueMemberS)
	sk, ok2 := av[dynSK].(*types.AttributeValueMemberS)
	if !ok1 || !ok2 {
		return Item{}, 0, fmt.Errorf("coord: dynamo item without string pk and sk: %w", ErrCorrupt)
	}
	it.PK, it.SK = pk.Value, sk.Value
	bad := func(name string) (Item, int64, error) {
		return Item{}, 0, fmt.Errorf("coord: dynamo item %s/%s: attribute %q: %w", clip(it.PK), clip(it.SK), name, ErrCorrupt)
	}
	for name, v := range av {
		switch {
		case name == dynPK || name == dynSK:
		case name == dynVersion:
			n, ok := numValue(v)
			if !ok || n == 0 {
				return bad(name)
			}
			it.Version = n
		case name == dynExpires:
			n, ok := numValue(v)
			if !ok || n < 0 {
				return bad(name)
			}
			exp = n
		case strings.HasPrefix(name, dynAttr):
			s, ok := v.(*types.AttributeValueMemberS)
			if !ok {
				return bad(name)
			}
			if it.Attrs == nil {
				it.Attrs = make(map[string]string)
			}
			it.Attrs[name[len(dynAttr):]] = s.Value
		case strings.HasPrefix(name, dynCounter):
			n, ok := numValue(v)
			if !ok {
				return bad(name)
			}
			if it.Counters == nil {
				it.Counters = make(map[string]int64)
			}
			it.Counters[name[len(dynCounter):]] = n
		}
	}
	if it.Version == 0 {
		return bad(dynVersion)
	}
	if exp != 0 {
		it.ExpiresAt = time.Unix(exp, 0)
	}
	return it, exp, nil
}

func numValue(v types.AttributeValue) (int64, bool) {
	n, ok := v.(*types.AttributeValueMemberN)
	if !ok {
		return 0, false
	}
	i, err := strconv.ParseInt(n.Value, 10, 64)
	return i, err == nil
}

// mapDynErr turns a failed condition into ErrConditionFailed.
func mapDynErr(err error, cond Condition) error {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return fmt.Errorf("%s: %w", cond, ErrConditionFailed)
	}
	return err
}

// Put writes item when cond holds (PutItem with a condition expression).
func (d *Dynamo) Put(ctx context.Context, item Item, cond Condition) (Item, error) {
	if err := d.begin(ctx); err != nil {
		return Item{}, keyErr("put", item.PK, item.SK, err)
	}
	if err := checkItem(item); err != nil {
		return Item{}, err
	}
	if err := checkCond(cond, false); err != nil {
		return Item{}, err
	}
	out := cloneItem(item)
	out.ExpiresAt = roundExpiry(item.ExpiresAt)
	var exp int64
	if !out.ExpiresAt.IsZero() {
		exp = out.ExpiresAt.Unix()
	}
	// A random 63-bit version repeats the replaced item's with probability 2^-63; unlike
	// Bolt, Put cannot see it to draw again without a read.
	out.Version = newVersion()
	in := &dynamodb.PutItemInput{TableName: aws.String(d.table), Item: encodeItem(out, exp)}
	if expr, names, values := condExpr(cond, d.now()); expr != "" {
		in.ConditionExpression = aws.String(expr)
		in.ExpressionAttributeNames, in.ExpressionAttributeValues = names, values
	}
	if _, err := d.client.PutItem(ctx, in); err != nil {
		return Item{}, keyErr("put", item.PK, item.SK, mapDynErr(err, cond))
	}
	return cloneItem(out), nil
}

// getRaw reads the item with the key whether or not it is expired; nil when missing.
func (d *Dynamo) getRaw(ctx context.Context, pk, sk string) (*Item, int64, error) {
	out, err := d.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(d.table),
		Key:            d.key(pk, sk),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, 0, err
	}
	if len(out.Item) == 0 {
		return nil, 0, nil
	}
	it, exp, err := decodeDynamo(out.Item)
	if err != nil {
		return nil, 0, err
	}
	return &it, exp, nil
}

// Get returns the live item with the key (strongly consistent GetItem).
func (d *Dynamo) Get(ctx context.Context, pk, sk string) (Item, error) {
	if err := d.begin(ctx); err != nil {
		return Item{}, keyErr("get", pk, sk, err)
	}
	if err := checkKey(pk, sk); err != nil {
		return Item{}, err
	}
	it, exp, err := d.getRaw(ctx, pk, sk)
	if err != nil {
		return Item{}, keyErr("get", pk, sk, err)
	}
	if it == nil || expiredAt(exp, d.now()) {
		return Item{}, keyErr("get", pk, sk, ErrNotFound)
	}
	return *it, nil
}

// Query calls fn with the live items of pk under skPrefix in sort-key order (strongly
// consistent Query, queryPage items a request).
func (d *Dynamo) Query(ctx context.Context, pk, skPrefix string, fn func(Item) error) error {
	if err := checkPK(pk); err != nil {
		return err
	}
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(d.table),
		ConsistentRead:            aws.Bool(true),
		Limit:                     aws.Int32(queryPage),
		KeyConditionExpression:    aws.String("#pk = :pk"),
		ExpressionAttributeNames:  map[string]string{"#pk": dynPK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(pk)},
	}
	if skPrefix != "" {
		in.KeyConditionExpression = aws.String("#pk = :pk AND begins_with(#sk, :prefix)")
		in.ExpressionAttributeNames["#sk"] = dynSK
		in.ExpressionAttributeValues[":prefix"] = str(skPrefix)
	}
	for {
		if err := d.begin(ctx); err != nil {
			return keyErr("query", pk, skPrefix+"*", err)
		}
		out, err := d.client.Query(ctx, in)
		if err != nil {
			return keyErr("query", pk, skPrefix+"*", err)
		}
		now := d.now()
		for _, av := range out.Items {
			it, exp, err := decodeDynamo(av)
			if err != nil {
				return keyErr("query", pk, skPrefix+"*", err)
			}
			if expiredAt(exp, now) {
				continue
			}
			if err := fn(it); err != nil {
				return err
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			return nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// Delete removes the item with the key when cond holds (DeleteItem with a condition).
func (d *Dynamo) Delete(ctx context.Context, pk, sk string, cond Condition) error {
	if err := d.begin(ctx); err != nil {
		return keyErr("delete", pk, sk, err)
	}
	if err := checkKey(pk, sk); err != nil {
		return err
	}
	if err := checkCond(cond, true); err != nil {
		return err
	}
	in := &dynamodb.DeleteItemInput{TableName: aws.String(d.table), Key: d.key(pk, sk)}
	if expr, names, values := condExpr(cond, d.now()); expr != "" {
		in.ConditionExpression = aws.String(expr)
		in.ExpressionAttributeNames, in.ExpressionAttributeValues = names, values
	}
	if _, err := d.client.DeleteItem(ctx, in); err != nil {
		return keyErr("delete", pk, sk, mapDynErr(err, cond))
	}
	return nil
}

// Add adds delta to counter name: one UpdateItem (ADD) conditioned on the item being
// missing or live and the sum staying in int64. When that condition fails, a consistent
// read tells why: an expired item is replaced by a fresh one (PutItem conditioned on the
// expired item's version), an overflow fails, and a race retries.
func (d *Dynamo) Add(ctx context.Context, pk, sk, name string, delta int64) (int64, error) {
	if err := d.begin(ctx); err != nil {
		return 0, keyErr("add", pk, sk, err)
	}
	if err := checkKey(pk, sk); err != nil {
		return 0, err
	}
	if err := checkName(name); err != nil {
		return 0, err
	}
	counter := dynCounter + name
	// The sum stays in range when the old value is within bound.
	boundExpr, bound := "#c <= :bound", int64(math.MaxInt64)-delta
	if delta < 0 {
		boundExpr, bound = "#c >= :bound", int64(math.MinInt64)-delta
	}
	for attempt := 0; attempt < addAttempts; attempt++ {
		if err := d.begin(ctx); err != nil {
			return 0, keyErr("add", pk, sk, err)
		}
		now := d.now()
		out, err := d.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:        aws.String(d.table),
			Key:              d.key(pk, sk),
			UpdateExpression: aws.String("ADD #c :delta SET #ver = :ver"),
			ConditionExpression: aws.String("(attribute_not_exists(#pk) OR " + condLive + ")" +
				" AND (attribute_not_exists(#c) OR " + boundExpr + ")"),
			ExpressionAttributeNames: map[string]string{
				"#pk": dynPK, "#exp": dynExpires, "#c": counter, "#ver": dynVersion,
			},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":delta": num(delta), ":ver": num(newVersion()), ":now": num(now.Unix()), ":bound": num(bound),
			},
			ReturnValues: types.ReturnValueUpdatedNew,
		})
		if err == nil {
			v, ok := numValue(out.Attributes[counter])
			if !ok {
				return 0, keyErr("add", pk, sk, fmt.Errorf("counter %q: %w", name, ErrCorrupt))
			}
			return v, nil
		}
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			return 0, keyErr("add", pk, sk, err)
		}
		cur, exp, err := d.getRaw(ctx, pk, sk)
		if err != nil {
			return 0, keyErr("add", pk, sk, err)
		}
		switch {
		case cur == nil:
			continue // deleted since: try again
		case expiredAt(exp, now):
			fresh := Item{PK: pk, SK: sk, Version: newVersion(), Counters: map[string]int64{name: delta}}
			_, err := d.client.PutItem(ctx, &dynamodb.PutItemInput{
				TableName:                aws.String(d.table),
				Item:                     encodeItem(fresh, 0),
				ConditionExpression:      aws.String("#ver = :ver"),
				ExpressionAttributeNames: map[string]string{"#ver": dynVersion},
				ExpressionAttributeValues: map[string]types.AttributeValue{
					":ver": num(cur.Version),
				},
			})
			if err == nil {
				return delta, nil
			}
			if !errors.As(err, &ccf) {
				return 0, keyErr("add", pk, sk, err)
			}
		default:
			if _, ok := addInt64(cur.Counters[name], delta); !ok {
				return 0, keyErr("add", pk, sk, fmt.Errorf("counter %q %d%+d overflows int64: %w", name, cur.Counters[name], delta, ErrInvalid))
			}
		}
	}
	return 0, keyErr("add", pk, sk, fmt.Errorf("condition kept failing after %d attempts", addAttempts))
}

// AddAll adds every delta to its counter of the item in one UpdateItem (ADD of each
// counter). It checks int64 overflow on the answer rather than in a condition (a condition
// per counter would not fit DynamoDB's 4 KB expression limit): a counter that left the range
// is put back with a second UpdateItem and the call fails with ErrInvalid.
func (d *Dynamo) AddAll(ctx context.Context, pk, sk string, deltas map[string]int64) (map[string]int64, error) {
	if err := d.begin(ctx); err != nil {
		return nil, keyErr("add all", pk, sk, err)
	}
	if err := checkAddAll(pk, sk, deltas); err != nil {
		return nil, err
	}
	names := slices.Sorted(maps.Keys(deltas))
	attrNames := map[string]string{"#pk": dynPK, "#exp": dynExpires, "#ver": dynVersion}
	vals := map[string]types.AttributeValue{}
	var expr strings.Builder
	expr.WriteString("ADD ")
	for i, n := range names {
		if i > 0 {
			expr.WriteString(", ")
		}
		fmt.Fprintf(&expr, "#%d :%d", i, i)
		attrNames["#"+strconv.Itoa(i)] = dynCounter + n
		vals[":"+strconv.Itoa(i)] = num(deltas[n])
	}
	expr.WriteString(" SET #ver = :ver")
	for attempt := 0; attempt < addAttempts; attempt++ {
		if err := d.begin(ctx); err != nil {
			return nil, keyErr("add all", pk, sk, err)
		}
		now := d.now()
		vals[":ver"], vals[":now"] = num(newVersion()), num(now.Unix())
		out, err := d.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 aws.String(d.table),
			Key:                       d.key(pk, sk),
			UpdateExpression:          aws.String(expr.String()),
			ConditionExpression:       aws.String("attribute_not_exists(#pk) OR " + condLive),
			ExpressionAttributeNames:  attrNames,
			ExpressionAttributeValues: vals,
			ReturnValues:              types.ReturnValueUpdatedNew,
		})
		if err == nil {
			return d.addAllResult(ctx, pk, sk, names, deltas, out.Attributes)
		}
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			return nil, keyErr("add all", pk, sk, err)
		}
		// The item is expired: replace it by a fresh one holding only the deltas.
		cur, exp, err := d.getRaw(ctx, pk, sk)
		if err != nil {
			return nil, keyErr("add all", pk, sk, err)
		}
		if cur == nil || !expiredAt(exp, now) {
			continue // deleted or rewritten since: try again
		}
		fresh := Item{PK: pk, SK: sk, Version: newVersion(), Counters: maps.Clone(deltas)}
		_, err = d.client.PutItem(ctx, &dynamodb.PutItemInput{
			TableName:                 aws.String(d.table),
			Item:                      encodeItem(fresh, 0),
			ConditionExpression:       aws.String("#ver = :ver"),
			ExpressionAttributeNames:  map[string]string{"#ver": dynVersion},
			ExpressionAttributeValues: map[string]types.AttributeValue{":ver": num(cur.Version)},
		})
		if err == nil {
			return maps.Clone(deltas), nil
		}
		if !errors.As(err, &ccf) {
			return nil, keyErr("add all", pk, sk, err)
		}
	}
	return nil, keyErr("add all", pk, sk, fmt.Errorf("condition kept failing after %d attempts", addAttempts))
}

// addAllResult decodes AddAll's answer; a counter out of the int64 range is undone.
func (d *Dynamo) addAllResult(ctx context.Context, pk, sk string, names []string, deltas map[string]int64, attrs map[string]types.AttributeValue) (map[string]int64, error) {
	res := make(map[string]int64, len(names))
	var over []string
	for _, n := range names {
		v, ok := attrs[dynCounter+n].(*types.AttributeValueMemberN)
		if !ok {
			return nil, keyErr("add all", pk, sk, fmt.Errorf("counter %q: %w", n, ErrCorrupt))
		}
		i, err := strconv.ParseInt(v.Value, 10, 64)
		if errors.Is(err, strconv.ErrRange) {
			over = append(over, n)
			continue
		}
		if err != nil {
			return nil, keyErr("add all", pk, sk, fmt.Errorf("counter %q: %w", n, ErrCorrupt))
		}
		res[n] = i
	}
	if len(over) == 0 {
		return res, nil
	}
	undo := make(map[string]types.AttributeValue, len(names))
	attrNames := map[string]string{}
	var expr strings.Builder
	expr.WriteString("ADD ")
	for i, n := range names {
		if i > 0 {
			expr.WriteString(", ")
		}
		fmt.Fprintf(&expr, "#%d :%d", i, i)
		attrNames["#"+strconv.Itoa(i)] = dynCounter + n
		undo[":"+strconv.Itoa(i)] = num(-deltas[n])
	}
	_, err := d.client.UpdateItem(context.WithoutCancel(ctx), &dynamodb.UpdateItemInput{
		TableName: aws.String(d.table), Key: d.key(pk, sk), UpdateExpression: aws.String(expr.String()),
		ExpressionAttributeNames: attrNames, ExpressionAttributeValues: undo,
	})
	return nil, keyErr("add all", pk, sk, errors.Join(fmt.Errorf("counters %q overflow int64: %w", over, ErrInvalid), err))
}
