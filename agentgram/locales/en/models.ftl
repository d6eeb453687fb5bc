# Model choice (/model) and usage (/cost)
models-title = 🧠 <b>Model</b>: { $name } — <code>{ $model }</code>
models-pick = Pick the model this conversation uses (from its next request on):
models-item = • <b>{ $name }</b> — <code>{ $model }</code>
models-item-details = • <b>{ $name }</b> — <code>{ $model }</code> · { $details }
models-price = { $input } / { $output } per 1M tokens
models-switched = 🧠 This conversation now uses <b>{ $name }</b> (<code>{ $model }</code>).
models-switched-toast = Now using { $name }
models-unknown = ⚠️ There is no model named “{ $name }”. /model lists them.
models-unknown-toast = That model is no longer configured.
models-only-one = 🧠 <b>Model</b>: <code>{ $model }</code>. More models can be offered with <code>llm.models</code> in config.yml.
cost-empty = 📊 No model requests in this conversation yet.
cost-title = 📊 <b>This conversation</b>: { $rounds ->
        [one] one model request
       *[other] { $rounds } model requests
    }
cost-tokens = Prompt tokens: { $input } · completion tokens: { $output }
cost-line = • <code>{ $model }</code>: { $input } + { $output } tokens
cost-line-priced = • <code>{ $model }</code>: { $input } + { $output } tokens · ≈ { $cost }
cost-total = Cost: ≈ { $cost }
cost-total-partial = Cost: ≈ { $cost } (some models have no prices)
cost-no-prices = No prices configured (set <code>prices</code> in config.yml's llm section) — tokens only.
menu-model = Choose the model
menu-cost = Tokens and cost of this conversation
