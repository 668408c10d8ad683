//! [`Tuple`]: a Python tuple as a minijinja value, so that it prints as `('k', 1)`.

use std::sync::Arc;

use minijinja::value::{Enumerator, Object, ObjectRepr};
use minijinja::Value;

/// A Python tuple: a sequence that prints with parentheses.
#[derive(Debug)]
pub(crate) struct Tuple(pub Vec<Value>);

impl Tuple {
    pub(crate) fn value(items: Vec<Value>) -> Value {
        Value::from_object(Self(items))
    }
}

impl Object for Tuple {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Seq
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        self.0.get(key.as_usize()?).cloned()
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Seq(self.0.len())
    }
}
