//! `lkplake_value(mantissa, scale, float)`: a value of lake format 2 as the float the parser
//! read. Format 2 keeps each value as its printed decimal (`lkplake_schemas::decimal`), or as
//! the float when it has no short one; the views that give back format 1's columns call this.

use arrow::array::{Array, ArrayRef, AsArray, Float64Array, Int8Array, Int64Array};
use arrow::datatypes::{DataType, Float64Type, Int8Type, Int64Type};
use datafusion::error::DataFusionError;
use datafusion::logical_expr::{ColumnarValue, ScalarUDF, Volatility, create_udf};
use lkplake_schemas::decimal::Decimal;
use std::sync::Arc;

/// The function's name in SQL.
pub const NAME: &str = "lkplake_value";

/// The function, to register in a session.
pub fn udf() -> ScalarUDF {
    create_udf(
        NAME,
        vec![DataType::Int64, DataType::Int8, DataType::Float64],
        DataType::Float64,
        Volatility::Immutable,
        Arc::new(value),
    )
}

fn value(args: &[ColumnarValue]) -> Result<ColumnarValue, DataFusionError> {
    let arrays = ColumnarValue::values_to_arrays(args)?;
    let [mantissa, scale, float] = arrays.as_slice() else {
        return Err(DataFusionError::Internal(format!(
            "{NAME} takes a mantissa, a scale and a float"
        )));
    };
    let values = values(
        mantissa.as_primitive::<Int64Type>(),
        scale.as_primitive::<Int8Type>(),
        float.as_primitive::<Float64Type>(),
    );
    let values: ArrayRef = Arc::new(values);
    // A call on scalars alone answers a scalar.
    if args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_))) {
        return Ok(ColumnarValue::Scalar(
            datafusion::common::ScalarValue::try_from_array(&values, 0)?,
        ));
    }
    Ok(ColumnarValue::Array(values))
}

/// Each row's value: its decimal where it has a mantissa and a scale, else its float.
pub(crate) fn values(
    mantissa: &Int64Array,
    scale: &Int8Array,
    float: &Float64Array,
) -> Float64Array {
    (0..mantissa.len())
        .map(|i| {
            if mantissa.is_valid(i) && scale.is_valid(i) {
                Some(
                    Decimal {
                        mantissa: mantissa.value(i),
                        scale: scale.value(i),
                    }
                    .value(),
                )
            } else {
                float.is_valid(i).then(|| float.value(i))
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::prelude::SessionContext;

    #[tokio::test]
    async fn a_decimal_gives_back_its_float_and_a_row_without_one_its_stored_float()
    -> Result<(), DataFusionError> {
        let ctx = SessionContext::new();
        ctx.register_udf(udf());
        let batches = ctx
            .sql(
                "SELECT lkplake_value(m, CAST(s AS TINYINT), f) AS v FROM (VALUES \
                 (CAST(1152 AS BIGINT), -7, CAST(NULL AS DOUBLE)), \
                 (5, 2, NULL), (-345, 1, NULL), (NULL, NULL, 0.30000000000000004), \
                 (NULL, NULL, NULL)) AS t(m, s, f)",
            )
            .await?
            .collect()
            .await?;
        let values: Vec<Option<f64>> = batches
            .iter()
            .flat_map(|b| b.column(0).as_primitive::<Float64Type>().iter())
            .collect();
        assert_eq!(
            values,
            [
                Some(1.152e10),
                Some(0.05),
                Some(-34.5),
                Some(0.1 + 0.2),
                None
            ]
        );
        Ok(())
    }
}
