// What the Node tests answer each widget with, from the interaction its tool call carried: the
// HttpAgent test and the assistant-ui app (which esbuild bundles with it) share it.

/** A value for an interrupt, from the interaction its tool call carried. */
export function answer(interaction) {
  switch (interaction.type) {
    case "consent":
      return { accepted: true };
    case "likert":
      return interaction.value_schema.minimum + 1;
    case "single_choice":
      return interaction.options[0].id;
    case "multiple_choice":
      return [interaction.options[0].id];
    case "rating":
      return interaction.value_schema.minimum;
    case "ranking":
      return interaction.options.map((o) => o.id);
    case "yes_no":
      return true;
    default:
      return "Nothing else, thanks.";
  }
}
