// The types a fuzz input is decoded against, chosen by its first byte: the shapes terraform
// sends (objects of nested blocks, collections, dynamic slots).
use tfplugin::Type;

pub fn pick(selector: u8) -> Type {
    let all = [
        Type::Dynamic,
        Type::String,
        Type::Number,
        Type::list(Type::String),
        Type::set(Type::Number),
        Type::map(Type::Dynamic),
        Type::Tuple(vec![Type::String, Type::Number, Type::Bool]),
        Type::object([
            ("name", Type::String),
            ("replicas", Type::Number),
            ("labels", Type::map(Type::String)),
            (
                "config",
                Type::list(Type::object([
                    ("name", Type::String),
                    ("yaml", Type::String),
                    ("spot", Type::Bool),
                ])),
            ),
            ("extra", Type::Dynamic),
        ]),
    ];
    all[usize::from(selector) % all.len()].clone()
}
