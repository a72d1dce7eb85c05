//! String functions whose result a client sizes, held to the memory limit.
//!
//! DataFusion accounts the memory of sorts, joins and aggregations in its pool, not the values
//! a scalar function builds: `repeat('x', 2147483647)` allocated 2 GiB on a server started
//! with `--memory-limit 64M`. `repeat`, `lpad` and `rpad` are the functions whose result size
//! is an argument; here each reserves its result's size in the engine's memory pool before it
//! builds it, so a result larger than what is left of the limit fails with DataFusion's own
//! "Resources exhausted" instead of being allocated.

use datafusion::arrow::array::{AsArray, Int64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::compute::kernels::length::length;
use datafusion::arrow::datatypes::{DataType, FieldRef, Int64Type};
use datafusion::error::Result;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryPool};
use datafusion::logical_expr::simplify::{ExprSimplifyResult, SimplifyContext};
use datafusion::logical_expr::{
    ColumnarValue, Documentation, Expr, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF,
    ScalarUDFImpl, Signature,
};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// How a function's result size follows from its arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Size {
    /// `repeat(text, n)`: the text's bytes times n, per row.
    Repeat,
    /// `lpad(text, n [, fill])`, `rpad(...)`: n characters per row (counted as bytes, which
    /// they are for ASCII).
    Pad,
}

/// A built-in function that reserves its result's size in the pool before it runs.
#[derive(Debug)]
struct Bounded {
    inner: Arc<ScalarUDF>,
    size: Size,
    pool: Arc<dyn MemoryPool>,
}

impl PartialEq for Bounded {
    fn eq(&self, other: &Self) -> bool {
        self.inner == other.inner && self.size == other.size && Arc::ptr_eq(&self.pool, &other.pool)
    }
}

impl Eq for Bounded {}

impl Hash for Bounded {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.inner.name().hash(state);
        self.size.hash(state);
    }
}

/// The built-ins `repeat`, `lpad` and `rpad`, replaced in `ctx` by versions bounded by its
/// memory pool.
pub(super) fn register(ctx: &datafusion::prelude::SessionContext) {
    let pool = Arc::clone(&ctx.runtime_env().memory_pool);
    for (inner, size) in [
        (datafusion::functions::string::repeat(), Size::Repeat),
        (datafusion::functions::unicode::lpad(), Size::Pad),
        (datafusion::functions::unicode::rpad(), Size::Pad),
    ] {
        ctx.register_udf(ScalarUDF::new_from_impl(Bounded {
            inner,
            size,
            pool: Arc::clone(&pool),
        }));
    }
}

fn int64s(value: &ColumnarValue, rows: usize) -> Result<Int64Array> {
    let array = cast(&value.to_array(rows)?, &DataType::Int64)?;
    Ok(array.as_primitive::<Int64Type>().clone())
}

fn byte_lengths(value: &ColumnarValue, rows: usize) -> Result<Int64Array> {
    let array = value.to_array(rows)?;
    let lengths = length(&array).or_else(|_| length(&cast(&array, &DataType::LargeUtf8)?))?;
    int64s(&ColumnarValue::Array(lengths), rows)
}

/// The bytes the call's result will take, at least (saturating; null rows take none).
fn result_bytes(size: Size, args: &ScalarFunctionArgs) -> Result<usize> {
    let rows = args.number_rows;
    let Some(count) = args.args.get(1) else {
        return Ok(0);
    };
    let counts = int64s(count, rows)?;
    let per_row: Vec<i64> = match size {
        Size::Pad => counts.iter().map(|n| n.unwrap_or(0)).collect(),
        Size::Repeat => {
            let Some(text) = args.args.first() else {
                return Ok(0);
            };
            let texts = byte_lengths(text, rows)?;
            texts
                .iter()
                .zip(counts.iter())
                .map(|(len, n)| len.unwrap_or(0).saturating_mul(n.unwrap_or(0)))
                .collect()
        }
    };
    Ok(per_row
        .into_iter()
        .map(|bytes| usize::try_from(bytes.max(0)).unwrap_or(usize::MAX))
        .fold(0usize, usize::saturating_add))
}

impl ScalarUDFImpl for Bounded {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.inner.return_type(arg_types)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        self.inner.return_field_from_args(args)
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.inner.coerce_types(arg_types)
    }

    fn simplify(&self, args: Vec<Expr>, info: &SimplifyContext) -> Result<ExprSimplifyResult> {
        self.inner.simplify(args, info)
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.inner.documentation()
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let bytes = result_bytes(self.size, &args)?;
        let reservation =
            MemoryConsumer::new(format!("{}()", self.inner.name())).register(&self.pool);
        reservation.try_grow(bytes)?;
        // The result is handed to the plan, which does not account it: the reservation only
        // asks whether the pool has room for it now.
        self.inner.invoke_with_args(args)
    }
}
