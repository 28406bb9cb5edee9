//! Rust enums as Python `Enum` members: [`py_enum!`](crate::py_enum) and its support.

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{from_value, object_data, shape, to_value};
use crate::SerdeError;
use crate::{Ext, ExtCode, Value};

/// Support for [`py_enum!`](crate::py_enum): an enum value as Python stores an `Enum` member.
pub fn enum_to_py<E: Serialize>(module: &str, class: &str, value: &E) -> Result<Value, SerdeError> {
    Ok(Value::Ext(Ext::python(
        ExtCode::ConstructorSingleArg,
        module,
        class,
        to_value(value)?,
    )))
}

/// Support for [`py_enum!`](crate::py_enum): reads a Python `Enum` member of `module.class`.
pub fn enum_from_py<E: DeserializeOwned>(
    module: &str,
    class: &str,
    value: &Value,
) -> Result<E, SerdeError> {
    let data = object_data(value, ExtCode::ConstructorSingleArg, &[(module, class)])?;
    from_value(&data).map_err(|e| shape(format!("not a member of {module}.{class}: {e}")))
}

/// Declares that a Rust enum stands for a Python `Enum` class: its members are stored as
/// Python stores them (`[module, class, member.value]`), the value being the enum's serde form
/// (a unit variant is its name — rename variants to match the Python values, or use
/// `serde_repr` for integer values).
///
/// ```
/// use serde::{Deserialize, Serialize};
/// use stategraph_value::py::PyType;
///
/// #[derive(Serialize, Deserialize, Debug, PartialEq)]
/// enum Color {
///     #[serde(rename = "red")]
///     Red,
///     #[serde(rename = "blue")]
///     Blue,
/// }
/// stategraph_value::py_enum!(Color, "myapp.colors", "Color");
///
/// let v = Color::Red.to_py().unwrap();
/// assert_eq!(v.to_string(), "myapp.colors.Color(\"red\")");
/// assert_eq!(Color::from_py(&v).unwrap(), Color::Red);
/// ```
#[macro_export]
macro_rules! py_enum {
    ($ty:ty, $module:expr, $class:expr) => {
        impl $crate::py::PyType for $ty {
            fn to_py(&self) -> ::std::result::Result<$crate::Value, $crate::SerdeError> {
                $crate::py::enum_to_py($module, $class, self)
            }
            fn from_py(value: &$crate::Value) -> ::std::result::Result<Self, $crate::SerdeError> {
                $crate::py::enum_from_py($module, $class, value)
            }
        }
    };
}
