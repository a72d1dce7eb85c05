//! `string_agg` held to the memory limit.
//!
//! DataFusion's aggregations count what their accumulators hold in the memory pool, but under
//! pressure a partial aggregation emits its state early and a final one spills and merges:
//! a grouped `string_agg` building two 500 MB values took the server to 2.6 GB of RSS with
//! `--memory-limit 64M` before anything refused it. Here every `string_agg` accumulator also
//! reserves what it holds in the pool itself, after each batch it takes in, and the query
//! fails with DataFusion's own "Resources exhausted" as soon as the pool has no room: memory
//! stays within the limit and one batch of input.

use datafusion::arrow::array::{ArrayRef, BooleanArray};
use datafusion::arrow::datatypes::{DataType, FieldRef};
use datafusion::error::Result;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryPool, MemoryReservation};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::AggregateOrderSensitivity;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Documentation, EmitTo, GroupsAccumulator,
    ReversedUDAF, Signature,
};
use datafusion::scalar::ScalarValue;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// An aggregate function whose accumulators reserve their size in the pool.
#[derive(Debug, Clone)]
struct Reserving {
    inner: Arc<dyn AggregateUDFImpl>,
    pool: Arc<dyn MemoryPool>,
}

impl PartialEq for Reserving {
    fn eq(&self, other: &Self) -> bool {
        self.inner.name() == other.inner.name() && Arc::ptr_eq(&self.pool, &other.pool)
    }
}

impl Eq for Reserving {}

impl Hash for Reserving {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.inner.name().hash(state);
    }
}

/// Replaces the built-in `string_agg` of `ctx` by one bounded by its memory pool.
pub(super) fn register(ctx: &datafusion::prelude::SessionContext) {
    let pool = Arc::clone(&ctx.runtime_env().memory_pool);
    let inner = Arc::clone(datafusion::functions_aggregate::string_agg::string_agg_udaf().inner());
    ctx.register_udaf(AggregateUDF::new_from_impl(Reserving { inner, pool }));
}

impl Reserving {
    fn reservation(&self) -> MemoryReservation {
        MemoryConsumer::new(format!("{}()", self.inner.name())).register(&self.pool)
    }
}

impl AggregateUDFImpl for Reserving {
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

    fn return_field(&self, arg_fields: &[FieldRef]) -> Result<FieldRef> {
        self.inner.return_field(arg_fields)
    }

    fn is_nullable(&self) -> bool {
        self.inner.is_nullable()
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.inner.coerce_types(arg_types)
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        self.inner.state_fields(args)
    }

    fn order_sensitivity(&self) -> AggregateOrderSensitivity {
        self.inner.order_sensitivity()
    }

    fn reverse_expr(&self) -> ReversedUDAF {
        match self.inner.reverse_expr() {
            // Reversed into the bounded function, not back into the built-in.
            ReversedUDAF::Reversed(reversed) => {
                ReversedUDAF::Reversed(Arc::new(AggregateUDF::new_from_impl(Reserving {
                    inner: Arc::clone(reversed.inner()),
                    pool: Arc::clone(&self.pool),
                })))
            }
            other => other,
        }
    }

    fn default_value(&self, data_type: &DataType) -> Result<ScalarValue> {
        self.inner.default_value(data_type)
    }

    fn supports_null_handling_clause(&self) -> bool {
        self.inner.supports_null_handling_clause()
    }

    fn supports_within_group_clause(&self) -> bool {
        self.inner.supports_within_group_clause()
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.inner.documentation()
    }

    fn accumulator(&self, acc_args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(Held {
            inner: self.inner.accumulator(acc_args)?,
            reservation: self.reservation(),
        }))
    }

    fn groups_accumulator_supported(&self, args: AccumulatorArgs) -> bool {
        self.inner.groups_accumulator_supported(args)
    }

    fn create_groups_accumulator(
        &self,
        args: AccumulatorArgs,
    ) -> Result<Box<dyn GroupsAccumulator>> {
        Ok(Box::new(Held {
            inner: self.inner.create_groups_accumulator(args)?,
            reservation: self.reservation(),
        }))
    }
}

/// An accumulator and the pool's share for what it holds; the share goes back when it is
/// dropped.
#[derive(Debug)]
struct Held<A: ?Sized> {
    inner: Box<A>,
    reservation: MemoryReservation,
}

impl<A: ?Sized> Held<A> {
    /// Resizes the share to `size`; fails when the pool has no room for the growth.
    fn account(&mut self, size: usize) -> Result<()> {
        self.reservation.try_resize(size)
    }
}

impl Accumulator for Held<dyn Accumulator> {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.inner.update_batch(values)?;
        self.account(self.inner.size())
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        self.inner.evaluate()
    }

    fn size(&self) -> usize {
        self.inner.size()
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        let state = self.inner.state()?;
        self.account(self.inner.size())?;
        Ok(state)
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        self.inner.merge_batch(states)?;
        self.account(self.inner.size())
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.inner.retract_batch(values)?;
        self.account(self.inner.size())
    }

    fn supports_retract_batch(&self) -> bool {
        self.inner.supports_retract_batch()
    }
}

impl GroupsAccumulator for Held<dyn GroupsAccumulator> {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        self.inner
            .update_batch(values, group_indices, opt_filter, total_num_groups)?;
        self.account(self.inner.size())
    }

    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        let values = self.inner.evaluate(emit_to)?;
        self.account(self.inner.size())?;
        Ok(values)
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        let state = self.inner.state(emit_to)?;
        self.account(self.inner.size())?;
        Ok(state)
    }

    fn merge_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        total_num_groups: usize,
    ) -> Result<()> {
        self.inner
            .merge_batch(values, group_indices, total_num_groups)?;
        self.account(self.inner.size())
    }

    fn convert_to_state(
        &self,
        values: &[ArrayRef],
        opt_filter: Option<&BooleanArray>,
    ) -> Result<Vec<ArrayRef>> {
        self.inner.convert_to_state(values, opt_filter)
    }

    fn size(&self) -> usize {
        self.inner.size()
    }
}
